"""Real sharded and data-parallel training on two gloo ranks (CPU), with an
explicit ``watch()`` in each rank (dist_stacks.py), against a real
``vramscope record``: FSDP2 (``fully_shard``) and DDP with ``no_sync()``
accumulation. Each rank trains without and then with the hook from the same
seed: the same steps and bit-identical local weights, no warning of the
hook's, nothing printed by it; the recording holds both ranks, one step per
optimizer step, every phase of each micro-step and no other."""

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
                              env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
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
    for code, out, err in launch(stack, rec.sock):
        lines = out.splitlines()
        assert len(lines) == 1, out + err
        # exit 0, or gloo's teardown abort after the rank's result line
        assert code == 0 or TEARDOWN_ABORT in err, out + err
        assert "vramscope" not in err and "Traceback" not in err, err
        got = json.loads(lines[0])
        assert got["steps"] == [dist_stacks.STEPS] * 2, got
        assert got["hash"][0] == got["hash"][1], "the hook changed the weights: %s" % got
        assert got["warned"] == [], got
    procs = rec.processes(goodbyes=2)
    assert sorted(p["rank"] for p in procs) == [0, 1], [(p["pid"], p["rank"]) for p in procs]
    for p in procs:
        assert p["steps_total"] == dist_stacks.STEPS, [phase_order(s) for s in p["steps"]]
        for s in p["steps"]:
            counts = phase_counts(s)
            assert sorted(counts) == sorted(PHASES), (p["rank"], s["step"], phase_order(s))
            micro = dist_stacks.ACCUMULATION
            assert counts["forward"] == counts["loss"] == counts["backward"] == micro, counts
            assert counts["step"] == counts["zero_grad"] == 1, counts
