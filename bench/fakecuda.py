"""A CUDA allocator that costs what a real one costs, for CPU-only torch.

Installs itself into the REAL torch module (Debian torch 1.13 CPU here), so
the hook's real code path runs unchanged: ``_cuda.detect`` sees a device,
``CudaStats`` reads through torch's own ``torch.cuda.memory_stats_as_nested_dict``
(or calls ``torch._C._cuda_memoryStats`` directly where the hook does), and only
the C++ binding at the bottom is replaced.

Why ``torch._C._cuda_memoryStats``: in torch 1.13 and 2.x alike,
``memory_stats_as_nested_dict`` is ``if not is_initialized(): return {}``,
``_get_device_index(device)``, ``return torch._C._cuda_memoryStats(device)``
(torch/cuda/memory.py), and ``memory_stats`` flattens that dict in Python. A
cProfile of ``watch()`` on an H100 with torch 2.11 showed ~10 calls a step of
exactly this binding (shared/recordings/h100/README.md).

The cost: each call busy-waits ``read_us`` (default 12.8 us: the median of
``torch._C._cuda_memoryStats`` timed alone on that H100, torch 2.11.0+cu130,
same README) while holding the GIL, as the real binding does while it builds
its dict. It returns a nested dict of the real shape, made from
testdata/torch/memory_stats_torch23_a100.json (a real torch 2.3 dict from an
A100): a new one each call, built within that cost (the 12.8 us already
include building, and, timed in a loop, freeing the real one). A new dict,
as torch's binding builds one (``THCPModule_memoryStats``: a ``py::dict``
per call): nine of its dicts hold dicts, so the garbage collector tracks
them, and how long the hook keeps them decides how often it runs.
"""

import json
import os
import threading
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "testdata", "torch", "memory_stats_torch23_a100.json")
H100_READ_US = 12.8  # torch._C._cuda_memoryStats median, H100, torch 2.11 (README above)


def nested_from_flat(flat):
    """Rebuild memory_stats_as_nested_dict()'s shape from memory_stats()' flat keys."""
    nested = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = nested
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return nested


def _copy(d):
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in d.items()}


class FakeAllocator:
    """FakeAllocator is ``torch._C._cuda_memoryStats``: costs ``read_us``, counts calls.

    ``reads`` counts every call; ``training_reads`` only those made on the
    thread that installed it (the training thread), so sampler reads are
    told apart.
    """

    def __init__(self, read_us=H100_READ_US, pool=256, reset_us=None):
        with open(FIXTURE) as f:
            flat = json.load(f)
        base = nested_from_flat(flat)
        self._pool = []
        for i in range(pool):
            d = _copy(base)
            d["allocated_bytes"]["all"]["current"] += i * 512
            self._pool.append(d)
        self._i = 0
        self.cost_ns = int(read_us * 1000)
        # A reset costs H100_RESET_US (assumed, see there) when reads cost anything.
        self.reset_ns = int((H100_RESET_US if reset_us is None and read_us else reset_us or 0)
                            * 1000)
        self.reads = 0
        self.training_reads = 0
        self.resets = 0
        self._owner = threading.get_ident()
        self._saved = []

    def __call__(self, device):
        end = time.perf_counter_ns() + self.cost_ns
        self.reads += 1
        if threading.get_ident() == self._owner:
            self.training_reads += 1
        self._i = (self._i + 1) % len(self._pool)
        d = self._pool[self._i]
        if self.cost_ns:
            # A new dict, as torch's binding builds (module docstring), in
            # the CPU's cache as torch's is, within the call's cost.
            d = _copy(d)
            ns = time.perf_counter_ns
            while ns() < end:
                pass
        return d

    def _reset_peaks(self, device=None):
        """``torch._C._cuda_resetPeakMemoryStats``: costs ``reset_ns``, counted;
        the pool's figures do not change (bench/cost_model.py times, it does
        not check figures; SimAllocator does)."""
        end = time.perf_counter_ns() + self.reset_ns
        self.resets += 1
        if self.reset_ns:
            ns = time.perf_counter_ns
            while ns() < end:
                pass

    def install(self, torch):
        """Patch torch so that it reports one initialised CUDA device read through self."""
        self._saved = install_bindings(torch, self, self._reset_peaks)
        return self

    def uninstall(self):
        uninstall_bindings(self._saved)
        self._saved = []


def install_bindings(torch, stats, reset):
    """Make ``torch`` report one initialised CUDA device (an H100) whose
    ``torch._C._cuda_memoryStats`` is ``stats`` and ``_cuda_resetPeakMemoryStats``
    is ``reset`` (added on a CPU-only torch, replaced on a CUDA build): torch's
    own Python (torch.cuda.memory) runs above them unchanged. Returns what
    uninstall_bindings() undoes."""
    props = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3 (fake)",
                                  total_memory=85899345920,
                                  uuid="5e7f3a1c0b2d4c8e9f102a3b4c5d6e7f")
    patches = [
        (torch._C, "_cuda_memoryStats", stats),
        (torch._C, "_cuda_resetPeakMemoryStats", reset),
        (torch.cuda, "is_available", lambda: True),
        (torch.cuda, "is_initialized", lambda: True),
        (torch.cuda, "current_device", lambda: 0),
        (torch.cuda, "get_device_properties", lambda device=None: props),
    ]
    if hasattr(torch._C, "_accelerator_getDeviceStats"):
        # torch 2.x's torch.accelerator.memory_* read the same allocator
        # through their own bindings (torch/accelerator/memory.py).
        patches += [
            (torch._C, "_accelerator_getDeviceStats", stats),
            (torch._C, "_accelerator_resetPeakStats", reset),
            (torch._C, "_accelerator_isAllocatorInitialized", lambda: True),
        ]
    saved = []
    for obj, name, value in patches:
        saved.append((obj, name, getattr(obj, name, _MISSING)))
        setattr(obj, name, value)
    # torch.cuda.memory binds is_initialized at import: patch it there too.
    mem = getattr(torch.cuda, "memory", None)
    if mem is not None and hasattr(mem, "is_initialized"):
        saved.append((mem, "is_initialized", mem.is_initialized))
        mem.is_initialized = lambda: True
    return saved


def uninstall_bindings(saved):
    for obj, name, old in reversed(saved):
        if old is _MISSING:
            delattr(obj, name)
        else:
            setattr(obj, name, old)


_MISSING = object()


class CountingBinding:
    """CountingBinding wraps the REAL ``torch._C._cuda_memoryStats`` and
    ``torch._C._cuda_resetPeakMemoryStats`` (on a GPU): no added cost beyond
    one Python call each, reads and resets counted as FakeAllocator counts them."""

    def __init__(self):
        self.reads = 0
        self.training_reads = 0
        self.resets = 0
        self.reset_ns = 0  # the real reset's cost is what the GPU makes it
        self._owner = threading.get_ident()
        self._saved = []
        self._real = None
        self._real_reset = None

    def __call__(self, device):
        self.reads += 1
        if threading.get_ident() == self._owner:
            self.training_reads += 1
        return self._real(device)

    def _reset(self, device):
        self.resets += 1
        return self._real_reset(device)

    def install(self, torch):
        self._real = torch._C._cuda_memoryStats
        self._saved.append((torch._C, "_cuda_memoryStats", self._real))
        torch._C._cuda_memoryStats = self
        real_reset = getattr(torch._C, "_cuda_resetPeakMemoryStats", None)
        if real_reset is not None:
            self._real_reset = real_reset
            self._saved.append((torch._C, "_cuda_resetPeakMemoryStats", real_reset))
            torch._C._cuda_resetPeakMemoryStats = self._reset
        return self

    def uninstall(self):
        for obj, name, old in reversed(self._saved):
            setattr(obj, name, old)
        self._saved = []



# ---- a simulated caching allocator, from the H100 measurements -----------------------

# The seed-001 run's own stat_cuda prints on the H100 (a copy of
# shared/recordings/h100/s001_stat_cuda.json; its README explains it).
S001_STAT_CUDA = os.path.join(ROOT, "testdata", "h100", "s001_stat_cuda.json")
# torch's own reset cost is not measurable without a GPU. The binding
# (torch/csrc/cuda/Module.cpp THCPModule_resetPeakMemoryStats) unpacks the
# device index and calls CUDACachingAllocator::resetPeakStats, which takes the
# device allocator's mutex and sets peak = current in 9 stat arrays of 3 pools
# and 2 oversize stats (c10/cuda/CUDACachingAllocator.cpp): no CUDA call, no
# dict. 1 us is an upper bound assumed for it (a METH_O torch binding call
# costs 0.24 us on this box: _set_grad_enabled, bench/cost_model.py --reset-us).
# Real resets measured since then cost 0.157-0.20 us (H100 and H200, below);
# the cost model keeps 1.0, the figure its earlier tables were stated in.
H100_RESET_US = 1.0
# Measured on an H200 (torch 2.11.0+cu130, bench/gpu/read_cost.py, 20,000
# calls, medians; testdata/h200/README.md): one stats read 9.98 us, one peak
# reset 0.152 us. cost_model.py keeps the H100 read and the assumed reset
# above as its defaults, so that its figures compare across rounds; pass
# --read-us 9.98 --reset-us 0.15 for the H200's.
H200_READ_US = 9.98
H200_RESET_US = 0.152
# Later reads on H100 and H200 machines (testdata/h200/2026-11-27/README.md):
# resets 0.157-0.20 us, reads 10.35-12.87 us (one run's reads alone 21.4).
# What one real read leaves to the garbage collector, on an H200 (torch
# 2.11.0+cu130, Python 3.12.3, bench/gc_census.py --device cuda, the same
# README): 17 top-level keys, READ_GC_OBJECTS objects the collector counts
# as made (every dict), READ_TRACKED of them tracked (the dicts that hold
# dicts). A fake read must leave the same.
READ_GC_OBJECTS = 39
READ_TRACKED = 10


def gc_load(obj):
    """What a read leaves to the garbage collector: its dicts, nested ones
    walked (each one the collector counts as made), and how many of them it
    tracks."""
    import gc
    made, tracked = 1, 1 if gc.is_tracked(obj) else 0
    for v in obj.values():
        if type(v) is dict:
            m, t = gc_load(v)
            made, tracked = made + m, tracked + t
    return made, tracked


LARGE = 1 << 20  # the caching allocator's small/large pool boundary (1 MiB)
SEGMENT = 2 << 20  # large segments round to 2 MiB


def _zero(d):
    return {k: _zero(v) if isinstance(v, dict) else 0 for k, v in d.items()}


def seed001_script(path=S001_STAT_CUDA):
    """The seed-001 model's phases on the H100, from its own ``stat_cuda`` prints.

    Returns ``(start, phases)``: ``start`` = ``(allocated, reserved)`` at
    "beginning" (step -1), and ``phases[step][name]`` = ``(allocated at the
    phase's end, peak inside it, reserved at its end)`` for steps 0 and 1;
    every later step is step 1's (shared/recordings/h100/README.md: steps 1
    to 5 are identical, each peaking at step 1's 4,518,008,832 B).

    Where each number comes from: ends (allocated, reserved) are the print
    after the phase's line in seed001.py (``model.zero_grad()``,
    ``model(x, y)``, the loss line, ``loss.backward()``, ``opt.step()``).
    A peak is the print's max_allocated where it rose in that phase (the
    user never resets, so a rise is that phase's own peak: every phase of
    step 0, and step 1's backward). Where it did not rise (step 1 before
    backward; both steps' optimizer step) the print is only a bound, so the
    peak is taken as the larger of the phase's start and end plus step 0's
    overshoot for the same phase (its peak above its larger end), 0 for
    the optimizer step, whose peak never showed.
    """
    with open(path) as f:
        rows = json.load(f)
    start = next((r["allocated"], r["reserved"]) for r in rows if r["step"] == -1)
    prev_alloc, prev_max = start[0], rows[0]["max_allocated"]
    overshoot = {}
    phases = {}
    for r in rows:
        if r["step"] < 0 or r["step"] > 1:
            continue
        name, step = r["phase"], r["step"]
        top = max(prev_alloc, r["allocated"])
        if r["max_allocated"] > prev_max:
            peak = r["max_allocated"]
            if step == 0:
                overshoot[name] = peak - top
        else:
            peak = top + overshoot.get(name, 0)
        phases.setdefault(step, {})[name] = (r["allocated"], peak, r["reserved"])
        prev_alloc, prev_max = r["allocated"], r["max_allocated"]
    return start, phases


class SimAllocator:
    """A simulated CUDA caching allocator's statistics, for CPU-only torch.

    Counters follow CUDACachingAllocator's semantics: every stat has
    current, peak, allocated and freed; a change moves ``all`` and its pool
    (small below 1 MiB, large from it); peak = max(peak, current) on each
    change; ``reset_peaks`` sets peak = current in every stat, accumulated
    counts untouched. The nested dict has the keys of a real torch 2.3 dict
    (testdata/torch/memory_stats_torch23_a100.json, what torch 2.x's
    ``_cuda_memoryStats`` returns). ``__call__`` is ``_cuda_memoryStats``
    (a fresh dict each call, as torch builds one) and ``reset_peaks`` is
    ``_cuda_resetPeakMemoryStats``; each can busy-wait to cost what it costs
    on an H100 (``read_us``, ``reset_us``).

    The figures come from :func:`seed001_script`: ``phase(step, name)``
    moves the counters as that phase of the seed-001 model did on the H100
    (up to its peak, down to its end, reserved to its end).
    """

    def __init__(self, read_us=0.0, reset_us=0.0, script=None, leak_from=None, leak=0):
        with open(FIXTURE) as f:
            self.stats = _zero(nested_from_flat(json.load(f)))
        self.read_ns = int(read_us * 1000)
        self.reset_ns = int(reset_us * 1000)
        self.start, self.phases = script if script is not None else seed001_script()
        self.leak_from, self.leak = leak_from, leak
        self.reads = self.resets = 0
        self._blocks = []  # sizes of live allocations, oldest first
        self._live, self._handle = {}, 0  # malloc()'s blocks by handle
        self.limit = None  # reserved bytes past which malloc() runs out of memory
        self._observers, self._oom_error = [], RuntimeError
        self.truth, self._truth_key = {}, None  # truth_at()'s ledger
        self._saved = []
        self._alloc(self.start[0])
        self._reserve(self.start[1])

    # ---- the allocator's counters --------------------------------------------------

    def _move(self, stat, pool, delta):
        for key in ("all", pool):
            d = self.stats[stat][key]
            d["current"] += delta
            if delta > 0:
                d["allocated"] += delta
            else:
                d["freed"] -= delta
            if d["current"] > d["peak"]:
                d["peak"] = d["current"]

    def _alloc(self, n):
        if n <= 0:
            return
        pool = "large_pool" if n >= LARGE else "small_pool"
        for stat in ("allocated_bytes", "active_bytes", "requested_bytes"):
            self._move(stat, pool, n)
        for stat in ("allocation", "active"):
            self._move(stat, pool, 1)
        self._blocks.append(n)
        self._truth_note()

    def _free_to(self, target):
        """Free the newest blocks, the last one in part (split), down to ``target``."""
        while self._blocks and self.allocated > target:
            n = self._blocks.pop()
            pool = "large_pool" if n >= LARGE else "small_pool"
            for stat in ("allocated_bytes", "active_bytes", "requested_bytes"):
                self._move(stat, pool, -n)
            for stat in ("allocation", "active"):
                self._move(stat, pool, -1)
            if self.allocated < target:
                self._alloc(target - self.allocated)

    def _reserve(self, target):
        grow = target - self.stats["reserved_bytes"]["all"]["current"]
        if grow > 0:
            self._move("reserved_bytes", "large_pool", grow)
            self._move("segment", "large_pool", 1)
            self.stats["num_device_alloc"] += 1

    @property
    def allocated(self):
        return self.stats["allocated_bytes"]["all"]["current"]

    def phase(self, step, name):
        """Run ``name`` of ``step`` as the seed-001 model did (see the class)."""
        steps = self.phases
        end, peak, reserved = steps[min(step, max(steps))][name]
        if self.leak_from is not None and step >= self.leak_from:
            n = step - self.leak_from + (1 if name == "step" else 0)
            end, peak = end + n * self.leak, peak + n * self.leak
            reserved += -(-(n * self.leak) // SEGMENT) * SEGMENT
        self._reserve(reserved)
        self._alloc(peak - self.allocated)
        self._free_to(end)
        if self.allocated < end:
            self._alloc(end - self.allocated)

    # ---- the bindings --------------------------------------------------------------

    def __call__(self, device):
        t_end = time.perf_counter_ns() + self.read_ns
        self.reads += 1
        out = _copy(self.stats)
        if self.read_ns:
            ns = time.perf_counter_ns
            while ns() < t_end:
                pass
        return out

    def reset_peaks(self, device):
        t_end = time.perf_counter_ns() + self.reset_ns
        self.resets += 1
        stack = [self.stats]
        while stack:
            d = stack.pop()
            if "peak" in d:
                d["peak"] = d["current"]
            else:
                stack.extend(v for v in d.values() if isinstance(v, dict))
        if self.reset_ns:
            ns = time.perf_counter_ns
            while ns() < t_end:
                pass

    def memory_snapshot(self, holes=1):
        """``torch.cuda.memory_snapshot()`` of this allocator: its reserved
        memory as one segment whose blocks are the live allocations (the
        phases' and malloc()'s), oldest first, with the free memory (reserved - allocated) split into
        ``holes`` equal inactive blocks between them (a fragmented cache for
        holes > 1). The shape is torch's own: ``torch/cuda/memory.py``,
        ``_snapshot``'s ``Segment`` (``address``, ``total_size``, ``stream``,
        ``segment_type``, ``allocated_size``, ``active_size``, ``blocks``) and
        ``Block`` (``size``, ``requested_size``, ``address``, ``state``)."""
        reserved = self.stats["reserved_bytes"]["all"]["current"]
        free = reserved - self.allocated
        gaps = [free // holes] * holes
        gaps[-1] += free - sum(gaps)
        blocks, addr = [], 0
        live = self._blocks + list(self._live.values())  # the phases' blocks and malloc()'s
        every = max(1, len(live) // holes)
        for i, n in enumerate(live):
            blocks.append({"size": n, "requested_size": n, "address": addr,
                           "state": "active_allocated", "frames": []})
            addr += n
            if gaps and (i + 1) % every == 0 and len(gaps) > 1:
                g = gaps.pop()
                blocks.append({"size": g, "requested_size": 0, "address": addr,
                               "state": "inactive", "frames": []})
                addr += g
        for g in gaps:
            blocks.append({"size": g, "requested_size": 0, "address": addr,
                           "state": "inactive", "frames": []})
            addr += g
        return [{"device": 0, "address": 0, "total_size": reserved, "stream": 0,
                 "segment_type": "large", "segment_pool_id": (0, 0),
                 "allocated_size": self.allocated, "active_size": self.allocated,
                 "requested_size": self.allocated, "blocks": blocks}]
    # ---- tensors by handle, the device's limit and the allocator's own truth ----------

    def malloc(self, n):
        """Allocate ``n`` bytes as one block (a tensor); return its handle.

        Raises ``torch.cuda.OutOfMemoryError`` (after calling the
        out-of-memory observer, as CUDACachingAllocator does before it
        throws) when reserved memory would pass ``limit``."""
        n = int(n)
        if n <= 0:
            return None
        reserved = self.stats["reserved_bytes"]["all"]["current"]
        free_cached = reserved - self.allocated
        need = -(-max(0, n - free_cached) // SEGMENT) * SEGMENT
        if self.limit is not None and reserved + need > self.limit:
            self.stats["num_ooms"] += 1
            for fn in self._observers:
                fn(0, n, self.limit, self.limit - reserved)
            raise self._oom_error("CUDA out of memory. Tried to allocate %d bytes (simulated)" % n)
        if need:
            self._reserve(reserved + need)
        pool = "large_pool" if n >= LARGE else "small_pool"
        for stat in ("allocated_bytes", "active_bytes", "requested_bytes"):
            self._move(stat, pool, n)
        for stat in ("allocation", "active"):
            self._move(stat, pool, 1)
        self._handle += 1
        self._live[self._handle] = n
        self._truth_note()
        return self._handle

    def free(self, handle):
        """Free a block malloc() returned (None is a no-op)."""
        n = self._live.pop(handle, None)
        if n is None:
            return
        pool = "large_pool" if n >= LARGE else "small_pool"
        for stat in ("allocated_bytes", "active_bytes", "requested_bytes"):
            self._move(stat, pool, -n)
        for stat in ("allocation", "active"):
            self._move(stat, pool, -1)

    def spike(self, n):
        """A temporary of ``n`` bytes: allocated, then freed."""
        self.free(self.malloc(n))

    def empty_cache(self):
        """``torch._C._cuda_emptyCache``: reserved falls to what is allocated
        (rounded up to whole segments)."""
        target = -(-self.allocated // SEGMENT) * SEGMENT
        drop = self.stats["reserved_bytes"]["all"]["current"] - target
        if drop > 0:
            self._move("reserved_bytes", "large_pool", -drop)

    def truth_at(self, step, phase):
        """Start a new interval of the allocator's own ledger: from here until
        the next call, the highest allocated figure is ``(step, phase)``'s.
        Never reset by anyone (the hook's and the user's resets touch the
        counters torch shows, not this)."""
        self._truth_key = (step, phase)
        self.truth.setdefault(self._truth_key, self.allocated)
        self._truth_note()

    def _truth_note(self):
        k = self._truth_key
        if k is not None and self.allocated > self.truth[k]:
            self.truth[k] = self.allocated

    def _attach_observer(self, fn):
        self._observers.append(fn)

    def install(self, torch):
        """Make torch report one initialised CUDA device whose allocator is this."""
        self._saved = install_bindings(torch, self, self.reset_peaks)
        self._oom_error = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
        for name, fn in (("_cuda_emptyCache", self.empty_cache),
                         ("_cuda_attach_out_of_memory_observer", self._attach_observer)):
            self._saved.append((torch._C, name, getattr(torch._C, name, _MISSING)))
            setattr(torch._C, name, fn)
        return self

    def uninstall(self):
        uninstall_bindings(self._saved)
        self._saved = []


def on_backward(torch):
    """A ``torch.autograd.Function`` class whose ``apply(x, fn)`` returns x
    and calls ``fn()`` inside autograd's backward, where it reaches x: a
    simulated allocator moves as backward does (pyhook/tests/pinloop.py,
    bench/truth/drive.py)."""

    class OnBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, fn):
            ctx.fn = fn
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            ctx.fn()
            return grad, None

    return OnBackward
