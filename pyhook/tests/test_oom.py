"""The out-of-memory report (protocol addition 3) and goodbye "error" (addition 4)."""

import json
import os
import sys
import types

from conftest import ROOT, FakeCuda, make_config
from test_schema import check, shape_of
from vramscope import _client, _oom, _watch


def _oom_fixture():
    with open(os.path.join(ROOT, "testdata", "protocol", "additions.jsonl")) as f:
        return [m for m in (json.loads(line) for line in f if line.strip()) if m["type"] == "oom"]


class FakeC:
    """torch._C with the observer hook: keeps what is attached."""

    def __init__(self):
        self.observers = []

    def _cuda_attach_out_of_memory_observer(self, fn):
        self.observers.append(fn)


def _reset(monkeypatch):
    monkeypatch.setattr(_oom, "_state", {"client": None, "phase": None, "step": None,
                                         "observer": False, "error": False, "sent": False})
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)


def test_observer_sends_the_allocator_state(monkeypatch, monitor):
    _reset(monkeypatch)
    torch = types.SimpleNamespace(_C=FakeC())
    client = _client.Client(make_config(socket=monitor.path), cuda=FakeCuda())
    client.step = 21
    _oom.install(torch, client, lambda: "backward")
    assert len(torch._C.observers) == 1
    _oom.install(torch, client, lambda: "backward")  # once per process
    assert len(torch._C.observers) == 1
    # torch calls it with (device, bytes asked for, device total, device free)
    torch._C.observers[0](0, 4 << 30, 85520809984, 407044096)
    assert monitor.wait_for(lambda m: any(x["type"] == "oom" for x in m.messages()))
    msg = [m for m in monitor.messages() if m["type"] == "oom"][0]
    assert (msg["step"], msg["phase"], msg["requested"]) == (21, "backward", 4 << 30)
    assert (msg["device_free"], msg["device_total"]) == (407044096, 85520809984)
    assert msg["mem"]["allocated"] >= 0
    check(msg, shape_of(_oom_fixture()), set(), "oom")
    client.close(_oom.exit_reason(), timeout=2)
    assert monitor.wait_for(lambda m: m.messages()[-1]["type"] == "goodbye")
    assert monitor.messages()[-1]["reason"] == "exit"


def test_an_oom_in_an_evaluation_between_steps_is_the_steps_it_follows(
        monkeypatch, monitor, torch_mod):
    """An evaluation between steps is a user phase of the step it follows
    (docs/hook.md): the oom message and the census at it name that step,
    as the evaluation's own edges do, not the next one (whose update never
    began), which the monitor then took for the step the process died in."""
    _reset(monkeypatch)
    torch = torch_mod
    fake = types.SimpleNamespace(_C=FakeC())
    client = _client.Client(make_config(socket=monitor.path), cuda=FakeCuda())
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    _oom.install(fake, client, watcher.failing_phase, watcher.failing_step)
    x = torch.randn(3, 4)
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    with torch.no_grad():
        model(x)  # the evaluation after step 2
    assert client.step == 3
    fake._C.observers[0](0, 1 << 30, 85520809984, 1 << 20)
    assert monitor.wait_for(lambda m: any(x["type"] == "oom" for x in m.messages()))
    msg = [m for m in monitor.messages() if m["type"] == "oom"][0]
    assert (msg["step"], msg["phase"]) == (2, "eval")
    evals = [m["step"] for m in monitor.messages() if m.get("name") == "eval"]
    assert evals == [2]
    watcher.remove()
    client.close("exit", timeout=2)


def test_uncaught_oom_is_reported_and_the_goodbye_says_error(monkeypatch, monitor):
    _reset(monkeypatch)
    torch = types.SimpleNamespace()  # torch 1.13: no observer
    client = _client.Client(make_config(socket=monitor.path), cuda=FakeCuda())
    _oom.install(torch, client, lambda: None)
    seen = []
    _oom._excepthook.previous = lambda *a: seen.append(a[0])
    err = RuntimeError("CUDA out of memory. Tried to allocate 4.00 GiB")
    sys.excepthook(RuntimeError, err, None)
    assert seen == [RuntimeError], "the previous excepthook still runs"
    assert _oom.exit_reason() == "error"
    assert monitor.wait_for(lambda m: any(x["type"] == "oom" for x in m.messages()))
    msg = [m for m in monitor.messages() if m["type"] == "oom"][0]
    assert msg["requested"] is None and msg["phase"] is None
    client.close(_oom.exit_reason(), timeout=2)
    assert monitor.wait_for(lambda m: m.messages()[-1]["type"] == "goodbye")
    assert monitor.messages()[-1]["reason"] == "error"


def test_other_exceptions_send_no_oom(monkeypatch):
    _reset(monkeypatch)
    assert not _oom._is_oom(ValueError, ValueError("x"))
    assert not _oom._is_oom(RuntimeError, RuntimeError("shape mismatch"))
    OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})
    assert _oom._is_oom(OutOfMemoryError, OutOfMemoryError("x"))


def hello_of(msgs):
    return [m for m in msgs if m["type"] == "hello"][0]


SCRIPT = r"""
import torch, vramscope
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
vramscope.watch(model, opt)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
model(torch.randn(4, 8))
raise RuntimeError("CUDA out of memory. Tried to allocate 4.00 GiB")
"""


def test_a_real_process_dying_of_oom_says_so(torch_mod, monitor, tmp_path):
    """A real interpreter on real torch (CPU): the uncaught error is reported
    before atexit's goodbye, which says "error"."""
    import subprocess
    env = dict(os.environ, VRAMSCOPE_SOCKET=monitor.path,
               PYTHONPATH=os.path.join(ROOT, "pyhook"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 1 and b"CUDA out of memory" in proc.stderr, "the traceback still prints"
    assert monitor.wait_for(lambda m: m.messages() and m.messages()[-1]["type"] == "goodbye")
    got = monitor.messages()
    kinds = [m["type"] for m in got]
    assert "oom" in kinds and kinds.index("oom") < len(kinds) - 1
    oom = got[kinds.index("oom")]
    assert oom["step"] == 2
    if hello_of(got)["mem_source"]["kind"] == "cpu":  # a CPU run: the host's RSS
        assert oom["mem"]["allocated"] > 0 and oom["mem"]["allocated"] == oom["mem"]["reserved"]
    assert got[-1]["reason"] == "error"
