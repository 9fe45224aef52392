"""The memory sources beyond NVIDIA CUDA (docs/hook.md, "Devices").

The host reader (CPU runs) is tested for real: this process's RSS and the
kernel's resettable peak. ROCm, XPU and MPS are tested against fakes built
from the documented behaviour of their APIs; each fake names the docs it
follows.
"""

import json
import os
import resource
import subprocess
import sys
import textwrap
import threading
import types

import pytest

from conftest import ROOT, load_fixture_stats, make_config
from vramscope import _client, _cuda, _devices, _messages

MiB = 1 << 20


def touched(n):
    """``n`` bytes the process really holds (every page written)."""
    b = bytearray(n)
    b[::4096] = b"\1" * len(b[::4096])
    return b


def fixture_sources():
    with open(os.path.join(ROOT, "testdata", "protocol", "mem_sources.json")) as f:
        cases = json.load(f)["valid"]
    return {c["case"]: c["hello"].get("mem_source") for c in cases}


# ---- the host (CPU runs): real reads --------------------------------------------

linux_proc = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc")


@linux_proc
def test_host_reads_this_process_rss_and_its_peak():
    host = _devices.HostStats()
    a, peak, r, peak_r, retries, ooms = host.read_raw()
    assert a == r and peak == peak_r, "allocated = reserved = RSS on the host"
    assert a > 10 * MiB and peak >= a and retries is None and ooms is None
    keep = touched(64 * MiB)
    b = host.read_raw()
    assert b[0] - a >= 60 * MiB, "the RSS follows 64 MiB written"
    del keep
    assert host.read()["allocated"] > 0


@linux_proc
def test_host_peak_is_reset_after_each_read_where_the_kernel_allows():
    host = _devices.HostStats()
    peaks = host.start_exact()
    if peaks is None:
        pytest.skip("this kernel has no writable /proc/self/clear_refs")
    assert host.source == {"kind": "cpu", "peaks": "exact"}
    peaks.read_reset()
    keep = touched(96 * MiB)
    del keep  # freed: the RSS drops back, the peak stays
    during = peaks.read_reset()
    after = peaks.read_reset()
    assert during[1] - during[0] >= 90 * MiB, "the phase's peak holds the freed 96 MiB"
    assert after[1] - after[0] < 16 * MiB, "the next interval starts from the RSS then"
    assert list(peaks.step_reads)[-2:] == [during, after], "the Watcher's plan sees each read"


def status_kb(field):
    """A ``kB`` field of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


@linux_proc
def test_host_peak_is_this_process_s_in_one_exec_d_from_a_larger_one(tmp_path):
    # The kernel keeps, in ru_maxrss, the peak of the image a process
    # replaced by exec (a launcher that imported torch, then exec'd the
    # job): getrusage answers that one's peak while this process's RSS is
    # below it, and the reader takes VmHWM from status instead.
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent("""
        import os, resource, sys
        sys.path.insert(0, %(pyhook)r)
        from vramscope import _devices  # no torch: this process stays small
        MiB = 1 << 20

        def touched(n):
            b = bytearray(n)
            b[::4096] = b"\\1" * len(b[::4096])
            return b

        def status_kb(field):
            with open("/proc/self/status") as f:
                return int(next(ln for ln in f if ln.startswith(field + ":")).split()[1]) * 1024

        host = _devices.HostStats()
        peaks = host.start_exact()
        carried = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peaks.read_reset()
        keep = touched(64 * MiB)
        del keep
        during = peaks.read_reset()
        after = peaks.read_reset()
        print(carried, during[0], during[1], after[0], after[1], status_kb("VmHWM"),
              host.source["peaks"])
    """) % {"pyhook": os.path.dirname(os.path.dirname(_devices.__file__))})
    launcher = ("import os, sys\nb = bytearray(400 << 20)\nb[::4096] = b'\\1' * len(b[::4096])\n"
                "os.execv(sys.executable, [sys.executable, %r])\n" % str(script))
    proc = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    words = proc.stdout.split()
    carried, d_rss, d_peak, a_rss, a_peak, hwm = (int(w) for w in words[:6])
    assert carried >= 400 * MiB, "the launcher's 400 MiB peak came over exec: " + proc.stdout
    assert words[6] == "exact"
    assert d_peak < 300 * MiB and d_peak - d_rss >= 60 * MiB, \
        "the phase's peak is the 64 MiB this process freed, not the launcher's"
    assert a_peak - a_rss < 16 * MiB and a_peak < 300 * MiB, proc.stdout
    assert hwm < 300 * MiB


@linux_proc
def test_host_peak_is_not_raised_by_a_thread_that_exits():
    # The peak carried in ru_maxrss is set at exec and when the last thread
    # exits, never when one of several does: a worker thread that ends
    # while the RSS is high leaves the next interval's peak its own.
    host = _devices.HostStats()
    peaks = host.start_exact()
    if peaks is None:
        pytest.skip("this kernel has no writable /proc/self/clear_refs")
    keep = touched(96 * MiB)
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    del keep
    peaks.read_reset()  # the interval that held the 96 MiB
    later = peaks.read_reset()
    assert later[1] - later[0] < 16 * MiB, later
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert ru - later[0] < 16 * MiB, "ru_maxrss followed the reset: nothing was carried"


@linux_proc
def test_host_reader_never_touches_numbers_the_process_reused():
    # The process closes the reader's descriptors behind its back and opens
    # its own files, which get the same numbers: the reader neither reads
    # nor writes them, reopens its own, and reads on.
    host = _devices.HostStats()
    peaks = host.start_exact()
    if peaks is None:
        pytest.skip("this kernel has no writable /proc/self/clear_refs")
    peaks.read_reset()
    old = (host._statm, host._status, host._clear)
    for fd in old:
        os.close(fd)
    users = []  # pipes take the lowest free numbers: the reader's among them
    while not users or max(users) < max(old):
        users.extend(os.pipe())
    try:
        got = peaks.read_reset()
        assert got is not None and got[0] > 10 * MiB
        assert not {host._statm, host._status, host._clear} & set(users), "its own, reopened"
        for fd in users[0::2]:
            os.set_blocking(fd, False)
            with pytest.raises(BlockingIOError):
                os.read(fd, 1)  # nothing written into any of the user's pipes
        assert peaks.read_reset()[0] > 10 * MiB
    finally:
        for fd in users:
            os.close(fd)


@linux_proc
def test_host_without_clear_refs_reads_the_lifetime_peak(tmp_path):
    # A kernel (or a sandbox) that lets no process write clear_refs: nothing
    # is reset, the peak is the process's whole life's (peaks "process").
    for name in ("statm", "status"):
        os.symlink("/proc/self/" + name, str(tmp_path / name))
    host = _devices.HostStats(proc=str(tmp_path))
    assert host.source == {"kind": "cpu", "peaks": "process"}
    assert host.start_exact() is None
    first = host.read_raw()
    keep = touched(64 * MiB)
    del keep
    for _ in range(3):
        got = host.read_raw()
        assert got[1] - got[0] >= 60 * MiB, "the freed 64 MiB stay in the lifetime peak"
        assert got[1] >= first[1]
    assert abs(got[1] - status_kb("VmHWM")) < MiB


def test_host_without_proc_reads_nothing_and_says_so(tmp_path):
    host = _devices.HostStats(proc=str(tmp_path / "absent"))
    assert host.read_raw() is None and host.read() is None
    assert host.source == {"kind": "cpu", "peaks": "none"}
    assert host.start_exact() is None


@linux_proc
def test_host_client_reads_every_phase_on_breakdown_steps_and_once_a_plain_step(torch_mod):
    # The host's RSS follows the CUDA design: where the kernel resets the
    # peak RSS (exact), a plain step reads once, where it closes, and that
    # read's peak covers the whole step; steps 0-2 read every phase end.
    torch = torch_mod
    from vramscope import _watch
    host = _devices.HostStats()
    client = _client.Client(make_config(activations_every=0), cuda=host, start=False)
    assert client.hello["mem_source"]["kind"] == "cpu"
    assert client.hello["mem_source"]["peaks"] == ("exact" if client.exact else "process")
    assert client.hello["cuda"] is None
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8)
    try:
        for _ in range(8):  # well past the always-measured steps 0-2
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    finally:
        watcher.remove()
    edges = [e for item in client._queue if type(item) is tuple for e in _messages.edges_of(item)]
    ends = [item for item in edges if item.edge == "end"]
    assert len(ends) == 8 * 5
    first = [item for item in ends if item.step < 3]
    assert all(item.raw is not None for item in first), "steps 0-2 read every phase end"
    later = [item for item in ends if item.step >= 3]
    if not client.exact:  # no peak reset: every phase end is read, as before
        assert all(item.raw is not None for item in later)
        return
    read = [(item.step, item.name) for item in later if item.raw is not None]
    assert read == [(k, "step") for k in range(3, 8)], "one read a plain step, where it closes"
    assert all(item.extra and item.extra["span"] == "step"
               for item in later if item.name == "step")


def test_detect_follows_the_model_device(torch_mod):
    torch = torch_mod
    model = torch.nn.Linear(2, 2)
    got = _devices.detect(torch, model)
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert isinstance(got, _devices.HostStats)
    assert isinstance(_devices.detect(torch), _devices.HostStats), "no model: the host"
    assert _devices.detect(None) is None
    meta = torch.nn.Linear(2, 2, device="meta") if hasattr(torch, "device") else None
    if meta is not None:
        assert _devices.detect(torch, meta) is None, "memory the hook cannot read"


# ---- fakes built from documented behaviour ---------------------------------------

class Param:
    def __init__(self, kind, index=None):
        self.device = types.SimpleNamespace(type=kind, index=index)


class Model:
    def __init__(self, kind, index=None):
        self._p = Param(kind, index)

    def parameters(self):
        yield self._p


class FakeXpu:
    """torch.xpu as the PyTorch 2.5 docs describe it (torch.xpu.memory_stats,
    reset_peak_memory_stats, get_device_properties): ``memory_stats(device)``
    is the flat dict of the caching allocator's stats with CUDA's key names
    ("allocated_bytes.all.current", ".peak", "reserved_bytes.all.current",
    ...); an allocator never used answers {}. The values are the measured
    torch 2.3 A100 fixture (testdata/torch), standing for an XPU's."""

    def __init__(self, stats):
        self.stats = stats
        self.resets = 0

    def is_available(self):
        return True

    def memory_stats(self, device=None):
        return self.stats

    def reset_peak_memory_stats(self, device=None):
        self.resets += 1

    def get_device_properties(self, device=None):
        return types.SimpleNamespace(name="Intel(R) Data Center GPU Max 1550", total_memory=68719476736)


class FakeMps:
    """torch.mps as the PyTorch 2.0 docs describe it: ``current_allocated_memory()``
    is the memory occupied by tensors (not the pools' cache),
    ``driver_allocated_memory()`` what the Metal driver holds for the process
    (cache and MPSGraph included); no peak counter exists. 2.5 added
    ``recommended_max_memory()``. The figures are test values (not
    measured on a Mac): 300 and 512 MiB, and 22906503168 B (21.3 GiB) as
    the recommended maximum."""

    def __init__(self):
        self.current, self.driver = 300 * MiB, 512 * MiB

    def current_allocated_memory(self):
        return self.current

    def driver_allocated_memory(self):
        return self.driver

    def recommended_max_memory(self):
        return 22906503168


class FakeCudaModule:
    """torch.cuda on a ROCm build (PyTorch's HIP semantics notes: the
    torch.cuda interfaces, memory statistics included, work unchanged on
    ROCm, and ``torch.version.hip`` is set, ``torch.version.cuda`` None)."""

    def __init__(self):
        self.stats = load_fixture_stats()

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def current_device(self):
        return 0

    def memory_stats(self, device=None):
        return self.stats

    def get_device_properties(self, device):
        return types.SimpleNamespace(name="AMD Instinct MI300X", total_memory=205822885888)


def fake_torch(**kw):
    torch = types.SimpleNamespace(version=types.SimpleNamespace(hip=None, cuda=None),
                                  cuda=types.SimpleNamespace(is_available=lambda: False))
    for k, v in kw.items():
        setattr(torch, k, v)
    return torch


def test_xpu_reads_the_allocator_and_never_resets():
    stats = load_fixture_stats()
    xpu = FakeXpu(stats)
    seam = _devices.detect(fake_torch(xpu=xpu), Model("xpu", 0))
    assert isinstance(seam, _devices.XpuStats)
    assert seam.read() == _cuda.mem_from_stats(stats)
    assert seam.start_exact() is None and xpu.resets == 0, "the user's peaks stay theirs"
    xpu.stats = {}
    assert seam.read() is None, "an allocator never used"
    client = _client.Client(make_config(), cuda=seam, start=False)
    assert client.hello["mem_source"] == fixture_sources()["xpu"]
    assert not client.exact and client.hello["cuda"] is None


def test_xpu_without_memory_stats_is_not_read():
    xpu = types.SimpleNamespace(is_available=lambda: True)
    assert _devices.detect(fake_torch(xpu=xpu), Model("xpu", 0)) is None


def test_mps_reads_current_and_driver_memory_and_has_no_peak_counter():
    mps = FakeMps()
    seam = _devices.detect(fake_torch(mps=mps), Model("mps"))
    assert isinstance(seam, _devices.MpsStats)
    assert seam.read() == {"allocated": 300 * MiB, "max_allocated": 300 * MiB,
                           "reserved": 512 * MiB, "max_reserved": 512 * MiB}
    mps.current = 100 * MiB
    assert seam.read()["max_allocated"] == 100 * MiB, "no counter: a read's peak is its own value"
    client = _client.Client(make_config(), cuda=seam, start=False)
    assert client.hello["mem_source"] == fixture_sources()["mps"]
    assert not client.exact


def test_rocm_is_torch_cuda_labelled_by_torch_version_hip():
    cuda = FakeCudaModule()
    torch = fake_torch(cuda=cuda, version=types.SimpleNamespace(hip="6.4.43482", cuda=None),
                       _C=types.SimpleNamespace())
    seam = _devices.detect(torch, Model("cuda", 0))
    assert isinstance(seam, _cuda.CudaStats) and seam.source["kind"] == "rocm"
    assert seam.read() == _cuda.mem_from_stats(cuda.stats)
    assert seam.device_info()["name"] == "AMD Instinct MI300X"
    # Without torch._C's bindings there are no exact peaks: "counter".
    assert _client._mem_source(seam, False) == {"kind": "rocm", "peaks": "counter"}
    assert _client._mem_source(seam, True) == fixture_sources()["rocm"]
    torch.version.hip = None
    assert _devices.detect(torch, Model("cuda", 0)).source["kind"] == "cuda"


@linux_proc
def test_host_source_matches_the_shared_fixture():
    host = _devices.HostStats()
    want = fixture_sources()
    got = _client._mem_source(host, host.start_exact() is not None)
    assert got in (want["cpu"], want["cpu without clear_refs"])
    assert _client._mem_source(host, False) == want["cpu without clear_refs"]
    assert _client._mem_source(object(), True) is None, "a seam without a source: none sent"


@linux_proc
def test_host_forward_end_is_read_before_the_loop_lets_go_of_the_last_output(torch_mod):
    """A forward end above the user's own read after ``out = model(x)`` (a
    language model's step 1: by its logits' size): the hook reads at the
    forward's end, before the assignment rebinds ``out``, so the previous
    step's output is still resident; the user's read after it no longer
    holds that. The hook's figure is the RSS at that instant, exact: it
    matches a read at the forward's end."""
    torch = torch_mod
    from vramscope import _watch
    host = _devices.HostStats()
    client = _client.Client(make_config(), cuda=host, start=False)
    vocab = 1 << 15  # 64 × 32768 floats = 8 MiB of logits a step

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(16, vocab)
            self.at_end = []

        def forward(self, x):
            y = self.head(x)
            self.at_end.append(host.read_raw()[0])  # the RSS at the forward's end
            return y

    model = LM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    after = []
    out = None
    try:
        for _ in range(4):
            opt.zero_grad()
            out = model(torch.randn(64, 16))
            after.append(host.read_raw()[0])  # the user's own read, once out is rebound
            out.logsumexp(1).mean().backward()
            opt.step()
    finally:
        watcher.remove()
    # Steps 0-2 read every phase end; with the peak RSS reset (exact), step
    # 3 is a plain step, read once where it closes (docs/hook.md, "Which
    # edges read").
    fwd = [item.raw[0] for item in (e for i in client._queue if type(i) is tuple
                                    for e in _messages.edges_of(i))
           if item.name == "forward" and item.edge == "end"
           and item.raw is not None]
    assert len(fwd) == (3 if client.exact else 4)
    for step, (hook, inside) in enumerate(zip(fwd, model.at_end)):
        assert abs(hook - inside) < MiB, (step, hook, inside)
    # Where the previous output was released at the assignment, the user's
    # read is lower than the forward end by about its size.
    logits = 64 * vocab * 4
    assert any(inside - a > logits // 2 for inside, a in zip(model.at_end[1:], after[1:])), \
        (model.at_end, after)
