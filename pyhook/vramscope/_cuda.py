"""The one CUDA seam: every call into torch.cuda goes through CudaStats.

Tests replace it with a fake that has the same three methods. On a CPU-only
torch, or with no CUDA device, :func:`detect` returns None and the hook sends
``mem: null`` and no samples.
"""

import functools

from . import _peaks

# Keys of torch.cuda.memory_stats() and the protocol's mem field each feeds.
MEM_KEYS = (
    ("allocated", "allocated_bytes.all.current"),
    ("max_allocated", "allocated_bytes.all.peak"),
    ("reserved", "reserved_bytes.all.current"),
    ("max_reserved", "reserved_bytes.all.peak"),
    ("alloc_retries", "num_alloc_retries"),
    ("ooms", "num_ooms"),
)
_REQUIRED = 4


def mem_from_stats(stats):
    """Map one ``memory_stats()`` dict to the protocol's ``mem`` object.

    Returns None when a required key is missing (an allocator that was never
    initialised returns an empty dict). Optional counters are left out when
    absent; negative values are clamped to 0 so the message stays valid.
    """
    return mem_from_raw(tuple(stats.get(key) for _, key in MEM_KEYS))


def mem_from_nested(stats):
    """Map one ``memory_stats_as_nested_dict()`` dict (whose flattened, sorted
    copy memory_stats() is) to ``mem``, as mem_from_stats does."""
    return mem_from_raw(compact(stats))


def format_uuid(uuid):
    """Format a device UUID the way nvidia-smi and NVML print it (GPU-...)."""
    text = str(uuid)
    if text.startswith(("GPU-", "MIG-")):
        return text
    if len(text) == 32 and "-" not in text:
        text = "%s-%s-%s-%s-%s" % (text[:8], text[8:12], text[12:16], text[16:20], text[20:])
    return "GPU-" + text


def mem_from_raw(raw):
    """Map a ``read_raw()`` value to ``mem`` (None stays None), as mem_from_stats does.

    ``raw`` is a tuple of the six values in MEM_KEYS order, or the binding's
    own nested dict, which the hot path hands over untouched (the sender
    thread picks the values out: see :func:`compact`).
    """
    if raw is None:
        return None
    if type(raw) is dict:
        raw = compact(raw)
        if raw is None:
            return None
    mem = {}
    for i, (field, _) in enumerate(MEM_KEYS):
        value = raw[i]
        if value is None:
            if i < _REQUIRED:
                return None
            continue
        value = int(value)
        mem[field] = value if value > 0 else 0
    return mem


def compact(stats):
    """Return the six MEM_KEYS values of one ``torch._C._cuda_memoryStats`` dict
    as a tuple, by direct indexing (None for an allocator never initialised: {})."""
    try:
        a = stats["allocated_bytes"]["all"]
        r = stats["reserved_bytes"]["all"]
        return (a["current"], a["peak"], r["current"], r["peak"],
                stats.get("num_alloc_retries"), stats.get("num_ooms"))
    except (KeyError, TypeError):
        return None


def peak_held(raw):
    """``(max_allocated, allocated)`` of one read (the binding's dict, a
    read_raw() tuple or a ``mem`` dict), or None."""
    if type(raw) is dict:
        if "allocated" in raw:
            return raw["max_allocated"], raw["allocated"]
        raw = compact(raw)
    if raw is None:
        return None
    return raw[1], raw[0]


def _binding_reader(binding, initialized, device):
    """Return read_raw() over ``torch._C._cuda_memoryStats``: the binding's dict
    as it is, once CUDA says it is initialised (asked until it first says yes)."""
    ready = []

    def read_raw():
        if not ready:
            if not initialized():
                return None  # torch.cuda.memory_stats_as_nested_dict() returns {} here too
            ready.append(True)
        return binding(device)

    return read_raw


class CudaStats:
    """CudaStats reads the caching allocator of one CUDA device.

    ``read_raw()`` is the hot path (phase edges): one call of
    ``torch._C._cuda_memoryStats(device)`` where torch has it (1.13 and 2.x
    do; detected by attribute), whose fresh dict is returned untouched: the
    training thread queues it and the sender thread picks the six values
    (:func:`compact`), and frees it. Once CUDA is initialised the client
    calls ``fast_read``, the binding bound to the device, with no Python
    frame of ours at all. That binding is what ``torch.cuda.memory_stats_as_nested_dict``
    calls after its ``is_initialized()`` guard and device normalisation,
    which cost Python time per call: the guard is kept, but checked only
    until it first says yes (an initialised CUDA stays initialised; a forked
    child's client is disabled). It still costs what torch pays to build the
    ~120-entry nested dict (12.8 us median on an H100, torch 2.11), which is
    why the hook makes few reads (docs/hook.md, "Cost"). Without the
    binding, ``memory_stats_as_nested_dict()`` is read, else ``memory_stats()``
    (that dict flattened into ~120 dotted keys and sorted on every call).
    """

    def __init__(self, torch, device):
        self._torch = torch
        self._cuda = torch.cuda
        self.device = device
        # fast_read: the binding bound to the device, a C callable with no
        # Python frame, for callers once read_raw() has answered (CUDA is
        # initialised then); None without the binding.
        self.fast_read = None
        binding = getattr(getattr(torch, "_C", None), "_cuda_memoryStats", None)
        # An earlier hook's patch (still answering the user's view, _peaks)
        # is not the hook's read: read torch's own binding beneath it.
        binding = getattr(binding, "__vramscope_original__", binding)
        ready = getattr(self._cuda, "is_initialized", None)
        if callable(binding) and callable(ready):
            self.read_raw = _binding_reader(binding, ready, device)
            self.fast_read = functools.partial(binding, device)
            return
        nested = getattr(self._cuda, "memory_stats_as_nested_dict", None)
        if callable(nested):
            self._stats, self._map = nested, mem_from_nested
        else:
            self._stats, self._map = self._cuda.memory_stats, mem_from_stats
        self.read_raw = self._read_mapped

    def read(self):
        """Return the ``mem`` object from one allocator stats call, or None."""
        return mem_from_raw(self.read_raw())

    def _read_mapped(self):
        mem = self._map(self._stats(self.device))
        if mem is None:
            return None
        return tuple(mem.get(field) for field, _ in MEM_KEYS)

    def start_exact(self):
        """Start exact peaks (docs/hook.md, "Exact peaks and your counters"):
        return the device's :class:`_peaks.DevicePeaks` (the user's counters
        patched to stay as they were), or None where torch lacks the bindings
        or the device is not an index."""
        if self.fast_read is None or type(self.device) is not int:
            return None
        return _peaks.acquire(self._torch, self.device)

    def stop_exact(self, peaks):
        """Give back what start_exact() returned."""
        _peaks.release(self._torch, peaks)

    def device_info(self):
        """Return ``{"index", "uuid", "name", "total"}`` for the hello message."""
        props = self._cuda.get_device_properties(self.device)
        uuid = getattr(props, "uuid", None)
        return {
            "index": int(self.device),
            "uuid": format_uuid(uuid) if uuid is not None else None,
            "name": str(props.name),
            "total": int(props.total_memory),
        }


def detect(torch, model=None):
    """Return a CudaStats for the model's device (or the current one), or None."""
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
    except Exception:  # a broken driver is "no CUDA" for the hook
        return None
    index = None
    if model is not None:
        for p in model.parameters():
            if p.device.type == "cuda":
                index = p.device.index
            break
    if index is None:
        index = torch.cuda.current_device()
    return CudaStats(torch, index)
