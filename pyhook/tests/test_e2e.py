"""End to end: real CPU training with watch(), the real ``vramscope record``
process receiving it, and ``vramscope report`` reading the recording.

The binary is ``$VRAMSCOPE_BIN`` (``make test-py`` sets it); without it the
tests build one with ``go build`` and fail, not skip, when that fails.
"""

import json
import os
import subprocess
import time

from conftest import ROOT, Recorder
import vramscope

PHASES = ["zero_grad", "forward", "loss", "backward", "step"]
SUMMARY = "vramscope: 1 client,"


def start(recorders, binary, out, sock):
    r = Recorder(binary, out, sock)
    recorders.append(r)
    return r


def has_goodbye(msgs):
    return any(m["type"] == "goodbye" for m in msgs)


def stop_ok(rec):
    code, err = rec.stop()
    assert code == 0, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(SUMMARY), err
    assert " 0 bad messages; wrote %s " % rec.out in last, last
    return last


def report(binary, path, *args):
    proc = subprocess.run([binary, "report", *args, path], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def report_json(binary, path):
    rep = json.loads(report(binary, path, "--json"))
    assert rep["schema"] == "vramscope.report/v1"
    return rep


def make_model(torch):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def train(torch, model, opt, steps, micro=1):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for _ in range(steps):
        opt.zero_grad()
        for _ in range(micro):
            loss = torch.nn.functional.cross_entropy(model(x), y) / micro
            loss.backward()
        opt.step()


def wait_until(pred, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not pred():
        time.sleep(0.02)
    return pred()


def the_process(rep):
    assert len(rep["processes"]) == 1, rep["processes"]
    return rep["processes"][0]


def check_steps(proc, steps, counts=(1, 1, 1, 1, 1)):
    assert [s["step"] for s in proc["steps"]] == list(steps)
    # The hook reads the memory of the device the model lives on: a CUDA
    # allocator, or on CPU the process's RSS (docs/hook.md, "Devices").
    # Steps 0-2 read every phase end; a later step is read once where it
    # closes (plain) unless it moved (docs/hook.md, "Which edges read").
    cuda = proc["memory"]["kind"] != ""
    for s in proc["steps"]:
        assert [p["phase"] for p in s["phases"]] == PHASES, s
        assert [p["count"] for p in s["phases"]] == list(counts), s
        assert (s["peak_allocated"] is not None) is cuda, s
        for p in s["phases"]:
            assert not p["user"]
            if s["step"] < 3 or not cuda:
                assert (p["allocated_end"] is not None) is cuda
            if not cuda:
                assert p["peak_allocated"] is None
            assert p["start_s"] <= p["end_s"]
        starts = [p["start_s"] for p in s["phases"]]
        assert starts == sorted(starts)


def test_five_steps_recorded_and_reported_in_phase_order(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    out, sock = os.path.join(workdir, "run.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    model, opt = make_model(torch)
    handle = vramscope.watch(model, opt, socket=sock)
    train(torch, model, opt, 5)
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    summary = stop_ok(rec)
    assert " 5 steps, 0 lost, 0 dropped by hooks" in summary, summary

    proc = the_process(report_json(vs_bin, out))
    check_steps(proc, range(5))
    assert proc["steps_total"] == 5
    assert proc["lost"] == 0 and proc["dropped"] == 0 and proc["evicted"] == 0
    assert proc["connected"] is False, "goodbye arrived"
    assert proc["pid"] == os.getpid() and proc["torch"] == torch.__version__
    has_cuda = vramscope._cuda.detect(torch, model) is not None
    assert (proc["device"] is not None) is has_cuda
    measured = proc["anatomy"]["measured"]
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert measured["step"] == 2 and measured["weights"] == weights
    assert measured["gradients"] == weights and measured["optimizer"] == weights  # momentum
    assert measured["batch_size"] == 8 and measured["activations"] > 0

    text = report(vs_bin, out)
    for name in PHASES:
        assert name in text, "text report lacks %s:\n%s" % (name, text)


def test_gradient_accumulation_merges_micro_steps(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    out, sock = os.path.join(workdir, "acc.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    model, opt = make_model(torch)
    handle = vramscope.watch(model, opt, socket=sock)
    train(torch, model, opt, 5, micro=2)
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)

    raw = [m for m in rec.messages() if m["type"] == "phase" and m["step"] == 0]
    assert [(m["name"], m["micro"]) for m in raw if m["edge"] == "begin"] == [
        ("zero_grad", 0), ("forward", 0), ("loss", 0), ("backward", 0),
        ("forward", 1), ("loss", 1), ("backward", 1), ("step", 2)]

    proc = the_process(report_json(vs_bin, out))
    # One cell per phase; forward, loss and backward merge both micro-steps.
    check_steps(proc, range(5), counts=(1, 2, 2, 2, 1))
    # The report's step "micro" counts the forward/backward passes.
    assert {s["micro"] for s in proc["steps"]} == {2}


def test_monitor_started_after_training_began_gets_the_first_steps(
        torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    out, sock = os.path.join(workdir, "late.jsonl"), os.path.join(workdir, "s.sock")
    model, opt = make_model(torch)
    handle = vramscope.watch(model, opt, socket=sock)
    train(torch, model, opt, 2)
    assert handle.stats()["connects"] == 0
    rec = start(recorders, vs_bin, out, sock)
    assert wait_until(lambda: handle.stats()["connects"] == 1), "the hook never connected"
    train(torch, model, opt, 4)
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)

    proc = the_process(report_json(vs_bin, out))
    check_steps(proc, range(6))
    assert proc["lost"] == 0 and proc["duplicates"] == 0
    assert proc["dropped"] == 0 and proc["evicted"] == 0
    seqs = [m["seq"] for m in rec.messages()]
    assert seqs == list(range(handle.stats()["created"])), "every message, once, in order"


def test_monitor_killed_and_restarted(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    sock = os.path.join(workdir, "s.sock")
    first_out, second_out = os.path.join(workdir, "a.jsonl"), os.path.join(workdir, "b.jsonl")
    first = start(recorders, vs_bin, first_out, sock)
    model, opt = make_model(torch)
    handle = vramscope.watch(model, opt, socket=sock)
    train(torch, model, opt, 3)
    first.wait_for(lambda ms: any(m["type"] == "phase" and m["step"] == 2 for m in ms),
                   "step 2")
    first.kill()  # SIGKILL: no clean shutdown, the socket file stays behind
    # 700 steps with no monitor: ~4,900 entries (a phase switch's two
    # edges are one), more than the ring's 4,096.
    train(torch, model, opt, 700)
    stats = handle.stats()
    assert stats["send_errors"] >= 1 and stats["connects"] == 1
    assert stats["evicted"] > 0 and stats["dropped"] == 0

    second = start(recorders, vs_bin, second_out, sock)  # clears the stale socket
    assert wait_until(lambda: handle.stats()["connects"] == 2), "the hook never reconnected"
    train(torch, model, opt, 2)
    handle.remove()
    second.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(second)
    stats = handle.stats()

    proc = the_process(report_json(vs_bin, second_out))
    assert proc["connected"] is False and proc["steps_total"] > 0
    steps = [s["step"] for s in proc["steps"]]
    assert steps[:3] == [0, 1, 2], "the first steps were replayed"
    assert steps[-3:] == [702, 703, 704], "and the recent ones"
    # What the hook evicted is exactly the gap the monitor reports as lost.
    assert proc["lost"] == stats["evicted"] and proc["evicted"] == stats["evicted"]
    assert proc["dropped"] == 0

    # The killed monitor's file may end in a torn line; it still reports.
    old = the_process(report_json(vs_bin, first_out))
    assert old["connected"] is True, "no goodbye reached the killed monitor"
    assert [s["step"] for s in old["steps"]][:2] == [0, 1]
