"""Real sharded and data-parallel training on two gloo ranks (CPU), with an
explicit ``watch()`` in each rank (dist_stacks.py), against a real
``vramscope record``: FSDP2 (``fully_shard``) and DDP with ``no_sync()``
accumulation, and Lightning's ``Trainer`` with ``strategy="ddp"``. Each
rank trains without and then with the hook from the same seed: the same
steps and bit-identical local weights, no warning of the hook's, nothing
printed by it; the recording holds both ranks, one step per optimizer
step, every phase of each micro-step and no other."""

import json
import os
import subprocess
import sys

import pytest

import dist_stacks
from frameworks import (PHASES, TEARDOWN_ABORT, Recording, free_port, need, phase_counts,
                        phase_order)

HERE = os.path.dirname(os.path.abspath(__file__))


def launch(stack, sock):
    """Start both ranks; return their completed processes."""
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(),
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    env = {k: v for k, v in env.items() if not k.startswith("VRAMSCOPE_")}
    ranks = [subprocess.Popen([sys.executable, "dist_stacks.py", stack, sock], cwd=HERE,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    done = []
    for p in ranks:
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in ranks:
                q.kill()
            pytest.fail("%s did not finish in 240 s" % stack)
        done.append((p.returncode, out, err))
    return done


@pytest.mark.parametrize("stack", ["fsdp2", "ddp_no_sync"])
def test_two_ranks(stack, torch_mod, vs_bin, workdir, recorders):
    need("torch.distributed")
    if stack == "fsdp2":
        need("torch.distributed.fsdp._fully_shard")
    rec = Recording(vs_bin, workdir, recorders)
    procs = ranks_recorded(rec, stack, dist_stacks.STEPS)
    for p in procs:
        assert p["steps_total"] == dist_stacks.STEPS, [phase_order(s) for s in p["steps"]]
        for s in p["steps"]:
            counts = phase_counts(s)
            assert sorted(counts) == sorted(PHASES), (p["rank"], s["step"], phase_order(s))
            micro = dist_stacks.ACCUMULATION
            assert counts["forward"] == counts["loss"] == counts["backward"] == micro, counts
            assert counts["step"] == counts["zero_grad"] == 1, counts


def ranks_recorded(rec, stack, steps):
    """Run ``stack`` on two ranks into ``rec``; check each rank's result
    line (``steps`` optimizer steps with and without the hook, the same
    weights, no warning, nothing printed by the hook) and return the
    recording's two processes."""
    for code, out, err in launch(stack, rec.sock):
        lines = out.splitlines()
        assert len(lines) == 1, out + err
        # exit 0, or gloo's teardown abort after the rank's result line
        assert code == 0 or TEARDOWN_ABORT in err, out + err
        assert "vramscope" not in err and "Traceback" not in err, err
        got = json.loads(lines[0])
        assert got["steps"] == [steps] * 2, got
        assert got["hash"][0] == got["hash"][1], "the hook changed the weights: %s" % got
        assert got["warned"] == [], got
    procs = rec.processes(goodbyes=2)
    assert sorted(p["rank"] for p in procs) == [0, 1], [(p["pid"], p["rank"]) for p in procs]
    return procs


@pytest.mark.parametrize("layout,hook,case", [("submodules", "callback", "validation"),
                                              ("self_call", "watch", "validation"),
                                              ("submodules", "callback", "accumulation"),
                                              ("submodules", "callback", "manual")])
def test_lightning_ddp(layout, hook, case, torch_mod, vs_bin, workdir, recorders):
    """Lightning's DDP strategy calls the wrapped model for each
    training_step and validation_step, with the LightningModule's forward
    pointed at the step method (_ForwardRedirection): the model's own
    forward hooks frame the whole step. Each rank's steps show the phases
    of a single-device fit (test_fw_lightning.py): forward ends where the
    model's computation ends, one loss per micro-step; the sanity check's
    calls reach the model's hook in every layout (an eval in step 0 of
    watch(), which watches before it)."""
    need("torch.distributed")
    need("lightning")
    import lightning_fit
    rec = Recording(vs_bin, workdir, recorders)
    steps = dist_stacks.LIGHTNING_STEPS
    procs = ranks_recorded(rec, ":".join(("lightning", layout, hook, case)), steps)
    kw = lightning_fit.CASES[case][1]
    micro = kw.get("accumulate_grad_batches", 1)
    every = kw.get("val_check_interval", steps * micro) // micro
    for p in procs:
        assert p["steps_total"] == steps, [phase_order(s) for s in p["steps"]]
        for s in p["steps"]:
            order, zeros = lightning_fit.step_phases(s["step"], hook, layout,
                                                     (s["step"] + 1) % every == 0, sanity_seen=True)
            counts = phase_counts(s)
            assert phase_order(s) == order, (p["rank"], s["step"], phase_order(s))
            assert sorted(counts) == sorted(order), (p["rank"], s["step"], counts)
            assert counts["step"] == 1 and counts["zero_grad"] == zeros, (s["step"], counts)
            assert counts["forward"] == counts["loss"] == counts["backward"] == micro, counts


def test_hf_trainer_ddp(torch_mod, vs_bin, workdir, recorders):
    """transformers' Trainer on two ranks wraps the model in DDP and calls
    ``model.zero_grad()`` on the wrapper after each update, which a patch
    on the model never sees: the hook patches the wrapper that called the
    model too (_patch.calling_wrappers). Each step shows the phases of a
    single-process Trainer (test_fw_transformers.py), its zero_grad
    included, and that zero_grad's end is read: the memory held between
    steps, without the gradients it freed."""
    need("torch.distributed")
    need("transformers")
    rec = Recording(vs_bin, workdir, recorders)
    procs = ranks_recorded(rec, "hf_trainer", dist_stacks.HF_TRAINER_STEPS)
    micro = dist_stacks.HF_TRAINER_ACCUMULATION
    for p in procs:
        assert p["steps_total"] == dist_stacks.HF_TRAINER_STEPS, \
            [phase_order(s) for s in p["steps"]]
        for s in p["steps"]:
            counts = phase_counts(s)
            evaluated = (s["step"] + 1) % 2 == 0
            assert sorted(counts) == sorted(PHASES + ["eval"] * evaluated), \
                (p["rank"], s["step"], phase_order(s))
            assert counts["forward"] == counts["backward"] == micro, counts
            assert counts["step"] == counts["zero_grad"] == 1, counts
    with open(rec.out) as f:
        next(f)  # the recording's header
        msgs = [json.loads(line).get("msg") or {} for line in f]
    zero_ends = [m for m in msgs if m.get("type") == "phase"
                 and m["name"] == "zero_grad" and m["edge"] == "end"]
    assert len(zero_ends) == 2 * dist_stacks.HF_TRAINER_STEPS, zero_ends
    assert all(m.get("mem") for m in zero_ends), zero_ends
