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
A100), from a pool built beforehand, so building it costs nothing extra: the
12.8 us already include building (and, timed in a loop, freeing) the real one.
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

    def __init__(self, read_us=H100_READ_US, pool=256):
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
            ns = time.perf_counter_ns
            while ns() < end:
                pass
        return d

    def _reset_peaks(self, device=None):
        self.resets += 1

    def install(self, torch):
        """Patch torch so that it reports one initialised CUDA device read through self."""
        props = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3 (fake)",
                                      total_memory=85899345920,
                                      uuid="5e7f3a1c0b2d4c8e9f102a3b4c5d6e7f")
        patches = [
            (torch._C, "_cuda_memoryStats", self),
            (torch.cuda, "is_available", lambda: True),
            (torch.cuda, "is_initialized", lambda: True),
            (torch.cuda, "current_device", lambda: 0),
            (torch.cuda, "get_device_properties", lambda device=None: props),
            (torch.cuda, "reset_peak_memory_stats", self._reset_peaks),
        ]
        for obj, name, value in patches:
            self._saved.append((obj, name, getattr(obj, name, _MISSING)))
            setattr(obj, name, value)
        # torch.cuda.memory binds is_initialized at import: patch it there too.
        mem = getattr(torch.cuda, "memory", None)
        if mem is not None and hasattr(mem, "is_initialized"):
            self._saved.append((mem, "is_initialized", mem.is_initialized))
            mem.is_initialized = lambda: True
        return self

    def uninstall(self):
        for obj, name, old in reversed(self._saved):
            if old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)
        self._saved = []


_MISSING = object()


class CountingBinding:
    """CountingBinding wraps the REAL ``torch._C._cuda_memoryStats`` (on a GPU):
    no added cost beyond one Python call, reads counted as FakeAllocator counts them."""

    def __init__(self):
        self.reads = 0
        self.training_reads = 0
        self._owner = threading.get_ident()
        self._saved = []
        self._real = None

    def __call__(self, device):
        self.reads += 1
        if threading.get_ident() == self._owner:
            self.training_reads += 1
        return self._real(device)

    def install(self, torch):
        self._real = torch._C._cuda_memoryStats
        self._saved.append((torch._C, "_cuda_memoryStats", self._real))
        torch._C._cuda_memoryStats = self
        return self

    def uninstall(self):
        for obj, name, old in reversed(self._saved):
            setattr(obj, name, old)
        self._saved = []

