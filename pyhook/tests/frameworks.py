"""Helpers of the real-framework tests (test_fw_*.py): the
framework itself or a loud skip (a failure under VRAMSCOPE_REQUIRE_FRAMEWORKS=1,
which `make test-py` sets for its torch 2.x venv run), and a real
``vramscope record`` receiving the hook in this process."""

import importlib
import os
import socket
import warnings

import pytest

import lightning_fit
from test_e2e import has_goodbye, report_json, start, stop_ok, the_process

REQUIRE = os.environ.get("VRAMSCOPE_REQUIRE_FRAMEWORKS") == "1"
PHASES = ["zero_grad", "forward", "loss", "backward", "step"]


def need(name):
    """Import ``name``, or skip (fail with VRAMSCOPE_REQUIRE_FRAMEWORKS=1)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - torch 1.13's fsdp raises ValueError on Python 3.11
        if REQUIRE:
            pytest.fail("%s is not importable and VRAMSCOPE_REQUIRE_FRAMEWORKS=1: %s" % (name, exc))
        why = "not installed" if isinstance(exc, ImportError) else "not importable here (%s)" % exc
        pytest.skip("%s is %s (the torch 2.x venv of `make test-py` has it)" % (name, why))


def lightning():
    """``lightning`` (or a skip), its info lines kept quiet
    (lightning_fit.quiet_logs)."""
    L = need("lightning")
    lightning_fit.quiet_logs()
    return L


def need_attr(obj, attr, what):
    if not hasattr(obj, attr):
        if REQUIRE:
            pytest.fail("%s is missing and VRAMSCOPE_REQUIRE_FRAMEWORKS=1" % what)
        pytest.skip("%s is missing on this torch" % what)


class Recording:
    """A ``vramscope record`` process; ``sock`` is where to watch() to."""

    def __init__(self, vs_bin, workdir, recorders, name="fw"):
        self.vs_bin = vs_bin
        self.out = os.path.join(workdir, name + ".jsonl")
        self.sock = os.path.join(workdir, name + ".sock")
        self.rec = start(recorders, vs_bin, self.out, self.sock)

    def process(self):
        """Wait for the hook's goodbye, stop the recorder, return report --json's process."""
        self.rec.wait_for(has_goodbye, "the hook's goodbye")
        stop_ok(self.rec)
        return the_process(report_json(self.vs_bin, self.out))

    def processes(self, goodbyes):
        """Wait for ``goodbyes`` goodbyes (one a process), stop the recorder,
        return report --json's processes."""
        self.rec.wait_for(lambda msgs: sum(m["type"] == "goodbye" for m in msgs) >= goodbyes,
                          "%d goodbyes" % goodbyes)
        code, err = self.rec.stop()
        assert code == 0 and " 0 bad messages; " in err, err
        return report_json(self.vs_bin, self.out)["processes"]


# torch 2.15's gloo sometimes aborts a worker at teardown, after its training
# and its result line, with this line from the C++ runtime: about 1 run in 12
# of torchrun without vramscope on this project's 2-core machine, and 3 to 8
# in 20 of two plain `python` ranks that end with destroy_process_group()
# (with or without a barrier before it). Such a run
# finished its training; every figure the tests check is already there.
TEARDOWN_ABORT = "terminate called without an active exception"


def free_port():
    """A port nobody listens on now: each launch gets its own rendezvous port
    instead of the launchers' fixed 29500, which an earlier launch in the
    same run may still hold (TIME_WAIT) on a busy machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def phase_counts(step):
    return {p["phase"]: p["count"] for p in step["phases"]}


def phase_order(step):
    return [p["phase"] for p in step["phases"]]


def quietly(fn, *args, **kw):
    """fn's result and the set of warnings it raised (each kind once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kw)
    return result, {(w.category.__name__, str(w.message)) for w in caught}


def check_loop(fn, steps, micro, torch, vs_bin, workdir, recorders, capfd, first=None,
               rest=None):
    """Run ``fn(torch, sock=None) -> (weights hash, optimizer steps)`` without
    and then with the hook (``sock``: a real ``vramscope record``): the same
    result, warnings and output, and a recording with one step per optimizer
    step, each with the five phases, ``micro`` forwards, losses and
    backwards, and no other phase; with ``first``, step 0 has those phases
    in that order instead, and with ``rest`` every other step."""
    want, plain_warnings = quietly(fn, torch)
    plain = capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = quietly(fn, torch, sock=rec.sock)
    out = capfd.readouterr()
    assert got == want, ("the hook changed the weights or the steps", got, want)
    assert want[1] == steps, want
    assert hooked_warnings == plain_warnings, hooked_warnings ^ plain_warnings
    assert (out.out, out.err) == (plain.out, plain.err), out
    proc = rec.process()
    assert proc["steps_total"] == steps, [phase_order(s) for s in proc["steps"]]
    for s in proc["steps"]:
        want = first if s["step"] == 0 and first is not None else rest
        if want is not None:
            assert phase_order(s) == want, (s["step"], phase_order(s))
            continue
        counts = phase_counts(s)
        assert sorted(counts) == sorted(PHASES), (s["step"], phase_order(s))
        assert counts["forward"] == counts["loss"] == counts["backward"] == micro, counts
        assert counts["step"] == counts["zero_grad"] == 1, counts
    return proc
