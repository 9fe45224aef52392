"""Loops that zero after ``optimizer.step()`` count
one step per update, with an explicit ``watch()`` and under ``vramscope run``.

Real torch (whichever runs the suite: Debian's 1.13 and the venv's 2.x), the
real hook, the real ``vramscope record``/``run`` and ``report --json``. The
loops are in loops.py; each also runs without the hook (in this process, the
same torch), and the final parameters must hash the same.
"""

import os
import subprocess
import sys

import pytest

import loops
import vramscope
from test_e2e import has_goodbye, report_json, start, stop_ok, the_process

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = ["forward", "loss", "backward", "step"]


def shape(proc):
    return [[(p["phase"], p["count"]) for p in s["phases"]] for s in proc["steps"]]


def run_recorded(vs_bin, workdir, argv, env=None, timeout=300, name="run.jsonl", ok=None):  # noqa: F811
    """``vramscope run --record FILE -- argv``: (completed process, report --json).
    ok(proc) says whether the run counts as complete (default: exit status 0)."""
    out = os.path.join(workdir, name)
    full = dict(os.environ, **(env or {}))
    for k in [k for k in full if k.startswith("VRAMSCOPE_")]:
        del full[k]
    proc = subprocess.run([vs_bin, "run", "--record", out, "--"] + argv, cwd=HERE, env=full,
                          capture_output=True, text=True, timeout=timeout)
    assert (ok or (lambda p: p.returncode == 0))(proc), proc.stdout + proc.stderr
    return proc, report_json(vs_bin, out)


def recorded_in_process(torch, vs_bin, workdir, recorders, fn):  # noqa: F811
    out, sock = os.path.join(workdir, "w.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    handle, done, digest = fn(torch, watch=lambda m, o: vramscope.watch(m, o, socket=sock))
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)
    return done, digest, the_process(report_json(vs_bin, out))


# What each loop's steps show: (phases of step 0, phases of every later step).
AFTER = TRAIN + ["zero_grad"]
EXPECTED = {
    # The zero before the loop heads step 0; each one after a step ends it.
    "pre_and_after": ([("zero_grad", 2)] + [(n, 1) for n in TRAIN], [(n, 1) for n in AFTER]),
    "accum_clip": ([(n, 3) for n in TRAIN[:3]] + [("step", 1), ("zero_grad", 1)],
                   [(n, 3) for n in TRAIN[:3]] + [("step", 1), ("zero_grad", 1)]),
    "hf_style": ([(n, 1) for n in AFTER], [(n, 1) for n in AFTER]),
    # The wrapper's zero_grad ends each step as the model's own would.
    "wrapper_zero_after": ([(n, 1) for n in AFTER], [(n, 1) for n in AFTER]),
    # Zeroed through the wrapper at each step's head: the hook finds the
    # wrapper at the first training forward, after step 0's zero_grad (as
    # auto-attach hooks after it), and each later one heads its step.
    "wrapper_zero_first": ([(n, 1) for n in TRAIN], [(n, 1) for n in ["zero_grad"] + TRAIN]),
    "zero_first": ([(n, 1) for n in ["zero_grad"] + TRAIN], [(n, 1) for n in ["zero_grad"] + TRAIN]),
    # SAM: one update of two passes, zeroed between them and after; the
    # base optimizer's step() is the step (inside SAM's step(closure), or
    # called by second_step()), the zero_grad() SAM calls between its passes
    # a phase of the step.
    "sam_two_calls": ([(n, 2) for n in TRAIN[:3] + ["zero_grad"]] + [("step", 1)],
                      [(n, 2) for n in TRAIN[:3] + ["zero_grad"]] + [("step", 1)]),
    # Stage 2's AdamW, made after the watch, takes it over at its first
    # step(); its first zero_grad() came before: unseen (expect, below).
    "unfreeze": ([(n, 1) for n in ["zero_grad"] + TRAIN], [(n, 1) for n in ["zero_grad"] + TRAIN]),
    "sam_closure": ([(n, 2) for n in TRAIN[:3] + ["zero_grad"]] + [("step", 1)],
                    [(n, 2) for n in TRAIN[:3] + ["zero_grad"]] + [("step", 1)]),
    # The evaluation without no_grad is the user phase "eval" of the step it
    # follows (below), as one under no_grad is: no step of its own.
    "eval_with_grad": ([(n, 1) for n in AFTER], [(n, 1) for n in AFTER]),
    "trained_in_eval_mode": ([(n, 1) for n in AFTER], [(n, 1) for n in AFTER]),
    # Each attack is the user phase "eval" of the step before it (step 0's
    # first too, as a sanity check before training is): the attacks' forwards
    # and backwards are none of a step's (below).
    "adversarial": ([("eval", 2)] + [(n, 1) for n in ["zero_grad"] + TRAIN],
                    [(n, 1) for n in ["zero_grad"] + TRAIN] + [("eval", 1)]),
}
EXPECTED["adversarial_backward"] = EXPECTED["adversarial"]
# Zeroed between the loss and the backward: one step an update, under
# auto-attach too (which takes step 0 as begun with a zero_grad).
EXPECTED["zero_middle"] = ([(n, 1) for n in ["forward", "loss", "zero_grad", "backward", "step"]],) * 2
# The fourth batch, skipped before its backward, is a step of its own
# (below) that skipped its update.
EXPECTED["nan_skip"] = EXPECTED["zero_first"]


def expect(name, steps, auto):
    first, rest = EXPECTED[name]
    if auto and name in ("pre_and_after", "zero_first", "unfreeze", "nan_skip"):
        # Auto-attach hooks at the first training forward, after step 0's
        # first zero_grad: it shows the rest of step 0.
        first = [(n, c) for n, c in first if n != "zero_grad"]
        if name == "pre_and_after":
            first.append(("zero_grad", 1))
    if auto and name.startswith("adversarial"):
        # Auto-attach hooks at the first training forward, after step 0's
        # first attack (a probe: no attach there) and its zero_grad.
        first = [(n, 1) for n in TRAIN] + [("eval", 1)]
    out = [first] + [rest] * (steps - 1)
    if name.startswith("adversarial"):  # no attack after the last step
        out[-1] = [(n, c) for n, c in out[-1] if n != "eval"]
    if name == "unfreeze":
        out[3] = [(n, 1) for n in TRAIN]
    if name == "eval_with_grad":
        out[2] = out[2] + [("eval", 1)]
    if name == "nan_skip":
        out[3] = [("zero_grad", 1), ("forward", 1), ("loss", 1)]
    return out


@pytest.mark.parametrize("name", sorted(loops.SHAPES))
def test_watched_loop_counts_one_step_per_update(name, torch_mod, vs_bin, workdir,
                                                  recorders):  # noqa: F811
    fn = loops.SHAPES[name]
    _, want_steps, want_hash = fn(torch_mod)
    done, digest, proc = recorded_in_process(torch_mod, vs_bin, workdir, recorders, fn)
    assert (done, digest) == (want_steps, want_hash), "the hook changed the result"
    assert proc["steps_total"] == done
    assert shape(proc) == expect(name, done, auto=False)
    said_eval_had_grad(name, proc)


@pytest.mark.parametrize("name", sorted(loops.SHAPES))
def test_auto_attached_loop_counts_one_step_per_update(name, torch_mod, vs_bin, workdir):  # noqa: F811
    argv = [sys.executable, "loops.py", name]
    _, done, digest = loops.SHAPES[name](torch_mod)  # the same loop, without vramscope
    proc, rep = run_recorded(vs_bin, workdir, argv)
    assert proc.stdout == "steps %d result %s\n" % (done, digest), "the hook changed the result"
    assert proc.stderr.count("\n") == 2, proc.stderr  # vramscope run's own two lines
    p = the_process(rep)
    assert p["steps_total"] == done
    assert shape(p) == expect(name, done, auto=True)
    said_eval_had_grad(name, p)


def said_eval_had_grad(name, proc):
    """The evaluation without no_grad, after step 2 (loops.eval_with_grad),
    is said to have run with gradients enabled, with the advice to run it
    under no_grad; no other loop is."""
    d = proc["diagnosis"]
    advised = [a for a in d["advice"] if "torch.no_grad()" in a["text"]]
    if name != "eval_with_grad":
        assert d["eval_grad_step"] == -1 and not advised
        return
    assert d["eval_grad_step"] == 2
    assert len(advised) == 1 and "after step 2" in advised[0]["because"], d["advice"]
