"""Which memory the hook reads: the device the watched model lives on.

Every reader is a seam with the shape of :class:`_cuda.CudaStats`
(``read_raw``, ``read``, ``fast_read``, ``start_exact``, ``stop_exact``,
``device_info``) plus ``source``: the hello's ``mem_source`` object
(docs/protocol.md, "Memory sources"). The client reads through it the same
way whatever the device, so the CUDA path is unchanged.

* ``cuda`` / ``rocm``: :class:`_cuda.CudaStats` (NVIDIA and AMD share
  ``torch.cuda``; ROCm is told apart by ``torch.version.hip``).
* ``xpu``: :class:`XpuStats`, ``torch.xpu.memory_stats`` (the same keys as
  CUDA's allocator): peaks are torch's counters, never reset by the hook.
* ``mps``: :class:`MpsStats`, ``torch.mps.current_allocated_memory()`` and
  ``driver_allocated_memory()``; MPS has no peak counter, so each read's
  peak is its own value (peaks come from reads and samples).
* ``cpu``: :class:`HostStats`, the process's resident memory (RSS) now and
  its peak, reset after each phase read where Linux lets a process reset
  its peak RSS (``/proc/self/clear_refs``).

Features are detected, never versions (docs/hook.md, "Devices").
"""

import collections
import os
import threading

from . import _cuda, _owned

try:  # not on Windows
    import resource as _resource
except ImportError:  # pragma: no cover
    _resource = None

# The memory sources, the hello's mem_source.kind: the hook's one list of
# them (the module docstring says what each reads). The monitor's words
# for each, and what each cannot give, are in ipc/memsource.go.
SOURCE_CUDA = "cuda"  # NVIDIA: torch.cuda's caching allocator
SOURCE_ROCM = "rocm"  # AMD: the same allocator, torch.cuda on a HIP build
SOURCE_XPU = "xpu"    # Intel: torch.xpu.memory_stats
SOURCE_MPS = "mps"    # Apple: current and driver allocated memory, no peak counter
SOURCE_CPU = "cpu"    # the process's resident memory (RSS)

# How each reader's max_allocated / max_reserved figures come about (the
# hello's mem_source.peaks).
PEAKS_EXACT = "exact"        # reset after each phase/mark read: exact since the previous one
PEAKS_COUNTER = "counter"    # the allocator's peak counter since start (or the user's reset)
PEAKS_SAMPLES = "samples"    # no peak counter: a read's peak is its own value
PEAKS_PROCESS = "process"    # host: peak RSS of the whole process, never reset
PEAKS_NONE = "none"          # nothing read here (a host without /proc): mem is null


def _fields(values):
    """``read_raw()``'s six-value tuple from a flat ``memory_stats()`` dict."""
    return tuple(values.get(key) for _, key in _cuda.MEM_KEYS)


class _Seam:
    """What every non-CUDA reader shares: ``read()`` maps ``read_raw()``."""

    fast_read = None

    def read(self):
        """Return the ``mem`` object of one read, or None."""
        return _cuda.mem_from_raw(self.read_raw())

    def start_exact(self):
        return None

    def stop_exact(self, peaks):
        pass

    def device_info(self):
        return None  # hello's "cuda" object: CUDA (and ROCm) devices only


class XpuStats(_Seam):
    """XpuStats reads Intel's XPU caching allocator through
    ``torch.xpu.memory_stats(device)`` (PyTorch 2.5+ docs: the flat dict of
    CUDA's keys, ``allocated_bytes.all.current``/``.peak``,
    ``reserved_bytes.all.current``/``.peak``). The hook does not reset its
    peaks (``torch.xpu.reset_peak_memory_stats`` would change what the
    user's ``max_memory_allocated()`` says): a phase's peak is torch's
    counter since start, a bound where it did not rise."""

    def __init__(self, torch, device):
        self._stats = torch.xpu.memory_stats
        self.device = device
        self.source = {"kind": SOURCE_XPU, "peaks": PEAKS_COUNTER}
        props = getattr(torch.xpu, "get_device_properties", None)
        if callable(props):
            try:
                p = props(device)
                self.source["name"] = str(p.name)
                total = getattr(p, "total_memory", None)
                if isinstance(total, int) and total > 0:
                    self.source["total"] = total
            except Exception:  # noqa: BLE001 - a name is a nicety
                pass

    def read_raw(self):
        values = _fields(self._stats(self.device))
        if any(v is None for v in values[:4]):
            return None  # an allocator never used answers {}
        return values


class MpsStats(_Seam):
    """MpsStats reads Apple's MPS allocator: ``allocated`` is
    ``torch.mps.current_allocated_memory()`` (tensors, without the pools'
    cache), ``reserved`` is ``driver_allocated_memory()`` (everything the
    Metal driver holds for the process, cache included); PyTorch 2.0-2.x
    docs. MPS keeps no peak counter: ``max_*`` equal the read's own values,
    so a phase's peak is the largest read or sample inside it (a bound)."""

    def __init__(self, torch):
        mps = torch.mps
        self._current = mps.current_allocated_memory
        self._driver = mps.driver_allocated_memory
        self.device = 0
        self.source = {"kind": SOURCE_MPS, "peaks": PEAKS_SAMPLES}
        rec = getattr(mps, "recommended_max_memory", None)  # 2.5+
        if callable(rec):
            try:
                total = rec()
                if isinstance(total, int) and total > 0:
                    self.source["total"] = total
            except Exception:  # noqa: BLE001
                pass

    def read_raw(self):
        a = int(self._current())
        r = int(self._driver())
        return (a, a, r, r, None, None)


# getrusage's ru_maxrss is the process's peak RSS (its memory map's) whoever
# asks: RUSAGE_THREAD answers it without summing the times of every thread.
_RUSAGE_WHO = None if _resource is None else getattr(_resource, "RUSAGE_THREAD",
                                                     _resource.RUSAGE_SELF)
_NO_BOUND = 1 << 62  # kB: nothing proved of the peak carried over exec yet


class _HostPeaks:
    """The resets of the process's peak RSS (the seam of _peaks.DevicePeaks
    that the client and the Watcher use): each hook read is followed by
    ``clear_refs`` "5"; the step's reads are kept for the Watcher's plan."""

    def __init__(self, host):
        self.lock = threading.Lock()
        self.step_reads = collections.deque(maxlen=64)
        self.clients = []
        self._reset = host._reset
        self.read_reset = host._read_reset_keeping(self.step_reads.append)

    def took(self, raw):
        self.step_reads.append(raw)
        self._reset()

    def start_with(self, raw):
        self._reset()

    def fold(self):
        pass


class HostStats(_Seam):
    """HostStats reads the process's resident memory: ``allocated`` and
    ``reserved`` are both the RSS now (what the process holds from the
    system: a CPU run has no allocator cache of its own to tell apart),
    ``max_*`` the peak RSS (Linux ``VmHWM``).

    Linux: the RSS is one ``pread`` of ``/proc/self/statm``, the peak
    ``getrusage().ru_maxrss``. Where ``/proc/self/clear_refs`` takes "5"
    (Linux 4.0+), the peak is reset after each phase read, so every phase's
    peak is exact (``peaks: "exact"``); else it is the process's lifetime
    peak (``"process"``). Elsewhere (macOS, Windows) there is no stdlib read
    of the RSS now: ``read_raw()`` returns None.

    ``ru_maxrss`` is the larger of the peak since the last reset and E, the
    peak the process carried over exec (the kernel sets it at exec from the
    image it replaced, and later only when the last thread exits: it does
    not change while the hook runs). Every ru_maxrss read is E or more, so
    their least bounds E (``_bound``). A ru_maxrss above the bound is the
    peak since the reset. In an interval whose RSS, read just after its
    reset, was at or above the bound, E is below that RSS, so ru_maxrss is
    never above the interval's peak (``_clean``). Any other peak is
    ``VmHWM``, parsed from ``/proc/self/status``: a process exec'd from a
    larger one, while its RSS stays below that one's."""

    def __init__(self, proc="/proc/self"):
        self.device = "cpu"
        self.source = {"kind": SOURCE_CPU, "peaks": PEAKS_PROCESS}
        self._proc = proc
        page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._page_kb = page // 1024
        self._statm = self._status = self._clear = None
        self._ids = (None, None, None)  # _owned.identity of each, as opened
        self._hot_ids = (None, None)  # (st_dev, st_ino) of statm and clear_refs
        self._bound = _NO_BOUND  # kB: E (above) is no higher
        self._clean = False  # E is no higher than this interval's peak
        if not self._open_files():
            self.read_raw = _none
            self.source["peaks"] = PEAKS_NONE
            return
        if self._clear is not None:
            self.source["peaks"] = PEAKS_EXACT
        self.read_raw = self._read

    def _open_files(self):
        """Open statm, status and (where it takes "5") clear_refs; remember
        what each is, so that a number the process closed and reused for a
        file of its own is never read or written as ours (_owned)."""
        flags = getattr(os, "O_CLOEXEC", 0)
        try:
            # Far above the process's own numbers (_owned.lift)
            self._statm = _owned.lift(os.open(self._proc + "/statm", os.O_RDONLY | flags))
            self._status = _owned.lift(os.open(self._proc + "/status", os.O_RDONLY | flags))
        except OSError:
            self._close()
            return False
        try:
            self._clear = _owned.lift(os.open(self._proc + "/clear_refs", os.O_WRONLY | flags))
            os.write(self._clear, b"5")
        except OSError:
            if self._clear is not None:
                os.close(self._clear)
            self._clear = None
        ids = (_owned.identity(self._statm), _owned.identity(self._status),
               _owned.identity(self._clear) if self._clear is not None else None)
        self._ids = ids
        self._hot_ids = (ids[0][:2], ids[2][:2] if ids[2] is not None else None)
        self._interval_starts()
        return True

    def _ours(self):
        """True while the three descriptors are still the files this opened;
        else they are reopened (the old numbers are the process's now, never
        closed by us) and False is returned when that fails."""
        if self._statm is None:
            return False  # a reopen failed: nothing is read from then on
        ids = self._ids
        if _owned.identity(self._statm) == ids[0] and _owned.identity(self._status) == ids[1] \
                and (self._clear is None or _owned.identity(self._clear) == ids[2]):
            return True
        had_clear = self._clear is not None
        self._statm = self._status = self._clear = None
        if not self._open_files() or had_clear and self._clear is None:
            self._statm = self._status = self._clear = None
            self._ids = (None, None, None)
            self._hot_ids = (None, None)
            self.read_raw = _none
            return False
        return True

    def _close(self):
        for fd in (self._statm, self._status, self._clear):
            if fd is not None:
                os.close(fd)
        self._statm = self._status = self._clear = None

    def _rss(self):
        """The RSS now, kB (statm's second field counts pages)."""
        return int(os.pread(self._statm, 128, 0).split()[1]) * self._page_kb

    def _status_peak(self):
        """``VmHWM`` from /proc/self/status, kB, or None."""
        data = os.pread(self._status, 8192, 0)
        i = data.find(b"VmHWM:")
        if i < 0:
            return None
        return int(data[i + 6:data.index(b"kB", i)])

    def _interval_starts(self, rss=None):
        """After a reset (or the opening): whether E is below this interval's
        peak. Where the RSS has fallen below every ru_maxrss read so far, one
        more read may lower the bound to it."""
        if rss is None:
            rss = self._rss()
        if rss < self._bound and _RUSAGE_WHO is not None:
            ru = _resource.getrusage(_RUSAGE_WHO).ru_maxrss
            if ru < self._bound:
                self._bound = ru
        self._clean = rss >= self._bound

    def _read(self):
        if not self._ours():
            return None
        return self._read_owned()

    def _read_owned(self):
        """One read, the descriptors known to be ours."""
        peak = None
        if _RUSAGE_WHO is not None:
            ru = _resource.getrusage(_RUSAGE_WHO).ru_maxrss
            if ru > self._bound or self._clean:
                peak = ru
            else:
                self._bound = ru  # E may be above the peak since the reset
        if peak is None:
            peak = self._status_peak()
            if peak is not None and self._clear is None and _RUSAGE_WHO is not None \
                    and ru <= peak:
                self._clean = True  # E <= VmHWM, and nothing resets it
        rss = self._rss()
        if peak is None or peak < rss:
            peak = rss  # the kernel folds the RSS now into its peak lazily
        return (rss << 10, peak << 10, rss << 10, peak << 10, None, None)

    def _reset(self):
        if self._clear is not None and self._ours():
            os.write(self._clear, b"5")
            self._interval_starts()

    def _read_reset(self):
        """A read and the peak's reset after it, the descriptors checked
        once for both: no code of the process runs between the two."""
        if not self._ours():
            return None
        raw = self._read_owned()
        if self._clear is not None:
            os.write(self._clear, b"5")
            self._interval_starts()
        return raw

    def _read_reset_keeping(self, keep):
        """The hook's read at an edge, kept with ``keep``. The usual case
        (both descriptors still ours, the peak from getrusage) is one frame
        of five calls into the kernel: fstat of statm and of clear_refs,
        getrusage, the write of "5", and the pread of statm, which gives the
        RSS now and starts the next interval. Anything else goes through
        :meth:`_read_reset`. Only st_dev and st_ino are compared: together
        they name one inode, whose file type follows."""
        slow = self._read_reset
        if _RUSAGE_WHO is None:
            def read_reset_kept():
                raw = slow()
                keep(raw)
                return raw
            return read_reset_kept
        fstat, pread, write = os.fstat, os.pread, os.write
        getrusage, who, page_kb, me = _resource.getrusage, _RUSAGE_WHO, self._page_kb, self

        def read_reset_kept():
            statm, clear, (statm_id, clear_id) = me._statm, me._clear, me._hot_ids
            try:
                a = fstat(statm)
                b = fstat(clear)
                ours = a.st_ino == statm_id[1] and a.st_dev == statm_id[0] \
                    and b.st_ino == clear_id[1] and b.st_dev == clear_id[0]
            except (OSError, TypeError):  # closed behind our back; None once gone
                ours = False
            if ours:
                peak = getrusage(who).ru_maxrss
                if peak > me._bound or me._clean:
                    write(clear, b"5")
                    rss = int(pread(statm, 128, 0).split()[1]) * page_kb
                    if rss >= me._bound:
                        me._clean = True
                    else:
                        me._interval_starts(rss)
                    if peak < rss:
                        peak = rss
                    raw = (rss << 10, peak << 10, rss << 10, peak << 10, None, None)
                    keep(raw)
                    return raw
            raw = slow()  # descriptors to reopen, or a peak only status gives
            keep(raw)
            return raw

        return read_reset_kept

    def start_exact(self):
        """Exact phase peaks where the kernel resets the peak RSS."""
        if self._clear is None:
            return None
        return _HostPeaks(self)


def _none():
    return None


def _model_device(model):
    """The device type and index of the model's first parameter, or (None, None)."""
    if model is None:
        return None, None
    try:
        for p in model.parameters():
            return p.device.type, p.device.index
    except Exception:  # noqa: BLE001
        pass
    return None, None


def _available(module):
    try:
        return module is not None and bool(module.is_available())
    except Exception:  # noqa: BLE001 - a broken driver is "not there"
        return False


def _cuda_in_use(torch):
    """True when this process has initialised CUDA (a GPU run whose watched
    parameters sit on the host, e.g. offloaded): its GPU memory is read."""
    cuda = getattr(torch, "cuda", None)
    if not _available(cuda):
        return False
    try:
        return bool(cuda.is_initialized())
    except Exception:  # noqa: BLE001
        return False


def rocm(torch):
    """True on a ROCm (HIP) build of torch: ``torch.version.hip`` is set."""
    return bool(getattr(getattr(torch, "version", None), "hip", None))


def detect(torch, model=None):
    """Return the reader of the memory the model lives on: its first
    parameter's device; without a model (or parameters), CUDA when there
    is one, else the host. A model on the host in a process that has
    initialised CUDA is a GPU run (parameters offloaded): CUDA is read.
    None without torch."""
    if torch is None:
        return None
    kind, index = _model_device(model)
    if kind == "cpu" and _cuda_in_use(torch):
        kind = None  # parameters on the host (offloaded), the work on the GPU
    if kind in (None, "cuda"):
        if _available(getattr(torch, "cuda", None)):
            stats = _cuda.detect(torch, model)
            if stats is not None:
                stats.source = {"kind": SOURCE_ROCM if rocm(torch) else SOURCE_CUDA,
                                "peaks": PEAKS_COUNTER}
                return stats
        if kind == "cuda":
            return None
        kind = "cpu"
    if kind == "xpu" and callable(getattr(getattr(torch, "xpu", None), "memory_stats", None)):
        return XpuStats(torch, 0 if index is None else index)
    if kind == "mps":
        mps = getattr(torch, "mps", None)
        if callable(getattr(mps, "current_allocated_memory", None)) and \
                callable(getattr(mps, "driver_allocated_memory", None)):
            return MpsStats(torch)
        return None
    if kind == "cpu":
        return HostStats()
    return None  # a device whose memory the hook cannot read (meta, ...)
