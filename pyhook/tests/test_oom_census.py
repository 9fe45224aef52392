"""At an out-of-memory error the hook says what was alive, by category, and
what the allocator's cache held (docs/census.md, "At an out-of-memory
error"): on the simulated allocator (bench/fakecuda.py, the seed-001
model's H100 figures) the cache's free blocks add up to the allocator's own
reserved - allocated, and fragmentation is named when the cache had room
for the request in no one block."""

import os
import subprocess
import sys

from conftest import ROOT, FakeMonitor  # noqa: F401 - the monitor fixture's class

sys.path.insert(0, os.path.join(ROOT, "bench"))
import fakecuda  # noqa: E402
from vramscope import _fragments  # noqa: E402


def _sim(step=5):
    sim = fakecuda.SimAllocator()
    for s in range(step):
        for name in ("zero_grad", "forward", "loss", "backward", "step"):
            sim.phase(s, name)
    sim.phase(step, "forward")
    return sim


def _mem(sim):
    s = sim.stats
    return {"allocated": s["allocated_bytes"]["all"]["current"],
            "reserved": s["reserved_bytes"]["all"]["current"]}


def test_the_cache_adds_up_to_the_allocators_figures():
    sim = _sim()
    kept = [sim.malloc(3 << 20) for _ in range(4)]  # tensors the loop keeps
    sim.free(kept.pop())
    mem = _mem(sim)
    snap = sim.memory_snapshot()
    blocks = snap[0]["blocks"]
    assert sum(b["size"] for b in blocks) == snap[0]["total_size"] == mem["reserved"]
    assert sum(b["size"] for b in blocks if b["state"] == "active_allocated") == mem["allocated"]
    total = 80 << 30
    got = _fragments.state(None, mem, 1 << 20, total - mem["reserved"] - (500 << 20), total,
                           snapshot=snap)
    assert got["cache"] == mem["reserved"] - mem["allocated"] == got["free_in_cache"]
    assert got["largest_free"] == got["free_in_cache"]  # one hole: nothing fragmented
    assert got["fragmented"] is False
    assert got["non_pytorch"] == 500 << 20
    assert got["expandable"] is None  # the snapshot does not say


def test_fragmentation_is_named_when_no_block_fits():
    sim = _sim()
    mem = _mem(sim)
    snap = sim.memory_snapshot(holes=4)
    free = mem["reserved"] - mem["allocated"]
    request = free // 2  # fits the cache's free total, not any quarter of it
    got = _fragments.state(None, mem, request, 0, 80 << 30, snapshot=snap)
    assert got["free_in_cache"] == free and got["largest_free"] < request
    assert got["fragmented"] is True
    snap[0]["is_expandable"] = True  # torch 2.1+ says per segment
    assert _fragments.state(None, mem, request, 0, 80 << 30, snapshot=snap)["expandable"] is True


def test_a_missing_or_broken_snapshot_leaves_the_figures_null():
    mem = {"allocated": 10, "reserved": 30}
    got = _fragments.state(None, mem, 5, None, None, snapshot=[{"blocks": "x"}, 7])
    assert got["cache"] == 20 and got["non_pytorch"] is None
    assert got["free_in_cache"] == 0 and got["fragmented"] is False
    assert _fragments.state(None, None, None, None, None)["largest_free"] is None


SCRIPT = r"""
import torch, vramscope
model = torch.nn.Linear(64, 64)
opt = torch.optim.Adam(model.parameters())
vramscope.watch(model, opt)
kept = []
for _ in range(3):
    opt.zero_grad()
    out = model(torch.randn(32, 64))
    out.sum().backward()
    opt.step()
    kept.append(torch.ones(4096))
raise RuntimeError("CUDA out of memory. Tried to allocate 4.00 GiB")
"""


def test_a_process_dying_of_oom_sends_what_was_alive(torch_mod, monitor):
    env = dict(os.environ, VRAMSCOPE_SOCKET=monitor.path, PYTHONPATH=os.path.join(ROOT, "pyhook"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 1
    assert monitor.wait_for(lambda m: m.messages() and m.messages()[-1]["type"] == "goodbye")
    kinds = [m["type"] for m in monitor.messages()]
    assert kinds.index("oom") < kinds.index("census") < kinds.index("goodbye")
    c = [m for m in monitor.messages() if m["type"] == "census"][0]["census"]
    assert c["reason"] == "oom"
    g = c["groups"]
    assert g["parameters"]["bytes"] == (64 * 64 + 64) * 4
    assert g["gradients"]["bytes"] == (64 * 64 + 64) * 4
    assert g["optimizer"]["bytes"] >= 2 * (64 * 64 + 64) * 4  # Adam's two moments
    kept = [h for h in c["holders"] if h["name"] == "kept[...]"]
    assert kept and kept[0]["bytes"] == 3 * 4096 * 4 and kept[0]["kind"] == "global"


MID_FORWARD = r"""
import torch, vramscope
from blocks import Net

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
vramscope.watch(model, opt)
for step in range(3):
    opt.zero_grad()
    model.blocks[2].boom = step == 2
    model(torch.randn(128, 16)).sum().backward()
    opt.step()
"""


def test_an_oom_inside_forward_says_which_modules_saved_what(torch_mod, monitor):
    """The error leaves the stack before the hook's excepthook runs; the
    frames of its traceback still hold the step's graph, which the census
    finds (the failing block's ``h``) and splits by module: what each
    block's layers saved, from the shapes (tests/blocks.py, batch 128,
    float32), and the failing block's first layer with its input and
    GELU's."""
    env = dict(os.environ, VRAMSCOPE_SOCKET=monitor.path,
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "pyhook"), os.path.join(ROOT, "pyhook", "tests")]))
    proc = subprocess.run([sys.executable, "-c", MID_FORWARD], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert monitor.wait_for(lambda m: m.messages() and m.messages()[-1]["type"] == "goodbye")
    c = [m for m in monitor.messages() if m["type"] == "census"][0]["census"]
    assert c["reason"] == "oom"
    got = {m["module"]: m["bytes"] for m in c["saved_by_module"]["modules"]}
    B = 128
    assert got == {"emb": B * 16 * 4,
                   "blocks.0.fc1": B * 64 * 4, "blocks.0.fc2": 2 * B * 256 * 4,
                   "blocks.1.fc1": B * 64 * 4, "blocks.1.fc2": 2 * B * 256 * 4,
                   "blocks.2.fc1": B * 64 * 4 + B * 256 * 4}, got
    h = [h for h in c["holders"] if h["name"] == "h"]
    assert h and h[0]["function"] == "forward" and h[0]["graph_saved"] == sum(got.values())
