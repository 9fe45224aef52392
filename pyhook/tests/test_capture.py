"""The deep capture on suspicion (docs/census.md, "Deep capture"): the
allocator's history between a suspect census and its follow-up, a snapshot
file beside the recording that torch's own ``_memory_viz`` reads, and the
sites whose live bytes grew.

torch records no CUDA history on a CPU box, so ``torch.cuda.memory`` is a
fake here, derived from torch's own source (``torch/cuda/memory.py``:
``_record_memory_history(enabled, ..., max_entries)``, ``_snapshot()``
returning ``{"segments": [...], "device_traces": [[entry, ...]]}``, each
entry ``{action, addr, size, stream, frames}`` with frames
``{filename, line, name}`` innermost first). The training loop allocates
through it as a CUDA tensor would."""

import os
import pickle
import stat
import sys
import time
import traceback

import pytest

from conftest import FakeCuda
from vramscope import _capture, _census_trigger, _client, _config, _fragments


class FakeMemory:
    """torch.cuda.memory's history, as the caching allocator keeps it."""

    def __init__(self):
        self.enabled = False
        self.max_entries = None
        self.trace = []
        self.next = 1 << 20
        self.calls = []

    def _record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=sys.maxsize):
        self.stacks = stacks
        self.calls.append(enabled)
        self.enabled = enabled is not None
        self.max_entries = max_entries
        if not self.enabled:
            self.trace = []

    def _snapshot(self, device=None):
        return {"segments": [{"device": 0, "address": 1 << 20, "total_size": self.next, "stream": 0,
                              "segment_type": "large", "allocated_size": 0, "active_size": 0,
                              "blocks": [{"size": self.next, "state": "inactive", "address": 1 << 20}]}],
                "device_traces": [list(self.trace)]}

    def alloc(self, size):
        addr, self.next = self.next, self.next + size
        if self.enabled:
            frames = [{"filename": f.filename, "line": f.lineno, "name": f.name}
                      for f in reversed(traceback.extract_stack()[:-1])]
            self.trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": frames})
            del self.trace[:-self.max_entries]
        return addr

    def free(self, addr, size):
        if self.enabled:
            for action in ("free_requested", "free_completed"):
                self.trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "frames": []})


def test_grown_sites_are_the_allocations_still_live(tmp_path):
    mem = FakeMemory()
    mem._record_memory_history("all", max_entries=1000)
    kept = []
    for _ in range(5):
        kept.append(mem.alloc(4096))  # the leak
        mem.free(mem.alloc(1 << 20), 1 << 20)  # a temporary
    sites = _capture.grown_sites(mem._snapshot())
    assert len(sites) == 1
    s = sites[0]
    assert s["bytes"] == 5 * 4096 and s["count"] == 5
    assert s["function"] == "test_grown_sites_are_the_allocations_still_live"
    assert os.path.basename(s["file"]) == "test_capture.py"


def test_the_file_is_private_and_torchs_viewer_reads_it(torch_mod, tmp_path):
    mem = FakeMemory()
    torch = type("T", (), {})()
    torch.cuda = type("C", (), {"memory": mem})()
    torch._C = None
    d = tmp_path / "rec"
    d.mkdir(mode=0o700)
    cap = _capture.Capture(torch, str(d), "s1", max_entries=50)
    assert cap.start(3)
    for _ in range(80):
        mem.alloc(512)
    out = cap.finish(8)
    assert mem.calls == ["all", None], "the history is switched off after the window"
    assert out["entries"] == 50 and out["max_entries"] == 50
    assert out["from_step"] == 3 and out["to_step"] == 8 and out["cost_ms"] >= 0
    st = os.lstat(out["file"])
    assert stat.S_IMODE(st.st_mode) == 0o600
    with open(out["file"], "rb") as f:
        data = pickle.load(f)
    viz = pytest.importorskip("torch.cuda._memory_viz")
    if not hasattr(viz, "trace"):
        pytest.skip("this torch's _memory_viz has no trace()")
    assert "Total" in viz.segsum(data) or viz.segsum(data)
    assert viz.trace(data)
    # no second file over the first, no link followed, no shared directory
    with pytest.raises(FileExistsError):
        _capture.write(out["file"], data)
    os.chmod(d, 0o777)
    assert not _capture.private_dir(str(d))


def test_a_suspect_census_on_cuda_captures_until_its_follow_up(torch_mod, monitor, tmp_path, monkeypatch):
    import torch
    import vramscope
    from vramscope import _census
    monkeypatch.setattr(_census, "DEFAULT_BUDGET", 10.0)
    mem = FakeMemory()
    monkeypatch.setattr(torch.cuda, "memory", mem)
    # the rest of the CUDA allocator's bindings that the hook asks, as on a
    # device where nobody else records history (no driver here to answer)
    monkeypatch.setattr(torch._C, "_cuda_isHistoryEnabled", lambda: mem.enabled, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_attach_out_of_memory_observer", lambda f: None, raising=False)
    d = tmp_path / "rec"
    d.mkdir(mode=0o700)
    cfg = _config.resolve(socket=monitor.path, sample_hz=0)
    client = _client.Client(cfg, cuda=FakeCuda(), torch_version=torch.__version__)
    monkeypatch.setattr(vramscope._api, "_client_for", lambda config=None, model=None: client)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kept = []
    with vramscope.watch(model, opt):
        for step in range(14):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            kept.append(mem.alloc(1 << 16))  # leak: a site the capture must name
            if step == 3:
                assert monitor.wait_for(lambda m: m._conns, 5)
                monitor._conns[0].sendall(b'{"v":1,"type":"census","id":4,"reason":"suspect","capture_dir":%s}\n'
                                          % ('"%s"' % d).encode())
                time.sleep(0.3)
    assert monitor.wait_for(lambda m: len([x for x in m.messages() if x["type"] == "census"]) >= 2, 10)
    first, second = [x for x in monitor.messages() if x["type"] == "census"][:2]
    assert "capture" not in first["census"]
    cap = second["census"]["capture"]
    assert cap["from_step"] == first["step"] and cap["to_step"] == second["step"]
    assert cap["sites"][0]["bytes"] == (second["step"] - first["step"]) * (1 << 16)
    assert cap["sites"][0]["function"] == "test_a_suspect_census_on_cuda_captures_until_its_follow_up"
    assert os.path.dirname(cap["file"]) == str(d)
    assert mem.calls == ["all", None]
    assert _census_trigger.FOLLOW_UP_STEPS == second["step"] - first["step"]


SNAPSHOTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "testdata", "snapshots")


def _real(name):
    with open(os.path.join(SNAPSHOTS, name), "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_the_real_window_names_the_line_that_keeps_activations(gpu):
    """testdata/snapshots/{h200,h100}_leak_window.pickle (its README): the
    loop keeps each step's hidden activation, 1,048,576 B, and the history
    ran for steps 4-7: four of them are live at the window's end, all made
    on one line of bench/gpu/snapshot_capture.py."""
    sites = _capture.grown_sites(_real(gpu + "_leak_window.pickle"))
    named = [s for s in sites if s["file"]]
    top = named[0]
    assert top["file"].endswith("bench/gpu/snapshot_capture.py") and top["function"] == "main"
    assert top["bytes"] == 4 * 1048576 and top["count"] == 4


@pytest.mark.parametrize("name", ["h200_capture_steps30-35.pickle", "h100_capture_steps29-34.pickle"])
def test_the_hooks_own_capture_on_a_real_gpu_names_the_line_that_makes_the_kept_tensors(name):
    """What the hook's capture on suspicion wrote on an H200 (census at step
    30, follow-up at 35) and on an H100 (29 and 34) while bench/gpu/leak_run.py
    ran recorded: the five hidden activations the loop kept in the window,
    8 MiB each, all made on line 64 (h = ...); the gradients the engine made
    in the last backward (no Python frame: the weights' size) come unnamed
    after them."""
    sites = _capture.grown_sites(_real(name))
    top = sites[0]
    assert top["file"].endswith("bench/gpu/leak_run.py") and top["line"] == 64
    assert top["function"] == "main" and top["bytes"] == 5 * (8 << 20) and top["count"] == 5
    assert sites[1]["file"] is None and sites[1]["count"] == 6 and sites[1]["bytes"] == 33652776


@pytest.mark.parametrize("gpu, request_bytes, cache, largest", [
    ("h200", 536870912, 2193408, 1572864),
    ("h100", 268435456, 2324480, 1966080),
])
def test_the_real_oom_is_the_limit_not_fragmentation(gpu, request_bytes, cache, largest):
    """testdata/snapshots/{h200,h100}_oom.pickle and their allocator JSON:
    a few MiB free in the cache (reserved - allocated, and
    inactive_split_bytes), the largest free block under 2 MiB against a
    request of 512 MiB (H200) or 256 MiB (H100, a smaller limit): the cache
    could not hold the request however it were laid out."""
    import json
    with open(os.path.join(SNAPSHOTS, gpu + "_oom_allocator.json")) as f:
        facts = json.load(f)
    assert "Tried to allocate %d.00 MiB" % (request_bytes >> 20) in facts["error"]
    st = facts["memory_stats"]
    mem = {"allocated": st["allocated_bytes.all.current"], "reserved": st["reserved_bytes.all.current"]}
    free, total = facts["mem_get_info"]
    got = _fragments.state(None, mem, request_bytes, free, total, snapshot=_real(gpu + "_oom.pickle"))
    assert got["cache"] == got["free_in_cache"] == st["inactive_split_bytes.all.current"] == cache
    assert got["largest_free"] == max(s["largest_free"] for s in facts["segments"]) == largest
    assert got["segments"] == len(facts["segments"]) == 22
    assert got["fragmented"] is False and got["expandable"] is False


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(SNAPSHOTS) if n.endswith(".pickle")))
def test_torchs_viewer_reads_every_real_snapshot(name):
    """Each real snapshot of testdata/snapshots (H200 and H100, written by
    torch's _dump_snapshot or by the hook's capture) is read back by the
    installed torch's own _memory_viz: its segment summary and both plots."""
    viz = pytest.importorskip("torch.cuda._memory_viz")
    if not hasattr(viz, "trace_plot"):
        pytest.skip("this torch's _memory_viz has no trace_plot()")
    data = _real(name)
    assert data["segments"] and data["device_traces"][0]
    assert "segments:" in viz.segsum(data)
    assert "<html" in viz.trace_plot(data).lower() and "<html" in viz.segment_plot(data).lower()
