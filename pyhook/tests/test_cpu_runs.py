"""CPU runs end to end: real training on CPU torch, the real
``vramscope record`` receiving it and ``vramscope report`` reading the file.

* A loop that keeps 4 MiB more host memory every step: the report finds the
  leak and its rate.
* The issue's three runs that gave tables of dashes: a GAN with two
  optimizers, DDP on gloo with two processes, a checkpointed model with
  gradient accumulation. Each gets a table of numbers (RSS and time) and a
  diagnosis that is true for it: none of them leaks.
"""

import os
import socket
import subprocess
import sys

import pytest

from conftest import ROOT
from frameworks import TEARDOWN_ABORT
from test_e2e import has_goodbye, report, report_json, start, stop_ok
import vramscope

MiB = 1 << 20
LEAK = 4 * MiB

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                reason="the host reader needs /proc (Linux)")


def hold(n):
    b = bytearray(n)
    b[::4096] = b"\1" * len(b[::4096])  # pages written: resident
    return b


def table_rows(text):
    """The step × phase rows of a text report's table."""
    rows, inside = [], False
    for line in text.splitlines():
        if "rss end" in line:
            inside = True
            continue
        if inside:
            if not line.strip() or line.lstrip().startswith(("…", "(")):
                if not line.strip():
                    inside = False
                continue
            rows.append(line)
    return rows


def check_numbers(proc, text):
    """Every step has its RSS peak and held memory; steps 0-2, read at every
    phase end, have every phase's figures and no dash in the table. Later
    steps follow the CUDA design (docs/hook.md, "Which edges read"): a plain
    step is read once, where it closes, and a phase of it has no figures of
    its own."""
    assert proc["memory"]["kind"] == "cpu", proc["memory"]
    assert proc["steps"], "no steps"
    for st in proc["steps"]:
        assert st["peak_allocated"] is not None and st["peak_allocated"] > 0, st
        assert st["held"] is not None and st["held"] > 0, st
        if st["step"] >= 3:
            continue
        for ph in st["phases"]:
            assert ph["allocated_end"] is not None and ph["peak_allocated"] is not None, (st, ph)
            assert ph["allocated_end"] > 0
    if text is None:
        return
    rows = table_rows(text)
    assert rows, text
    step = None
    for row in rows:
        words = row.split()
        if words[0].isdigit():  # a step's first row names it
            step = int(words[0])
        if step < 3:
            assert "–" not in row, "a dash in a CPU table:\n" + text


def record_in_process(vs_bin, workdir, recorders, train):
    out, sock = os.path.join(workdir, "run.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    train(sock)
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)
    return out


def test_a_host_memory_leak_is_found_with_its_rate(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    kept = []

    def train(sock):
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        with vramscope.watch(model, opt, socket=sock):
            for _ in range(24):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                kept.append(hold(LEAK))  # the leak: 4 MiB more every step

    out = record_in_process(vs_bin, workdir, recorders, train)
    rep = report_json(vs_bin, out)
    proc = rep["processes"][0]
    text = report(vs_bin, out)
    check_numbers(proc, text)
    d = proc["diagnosis"]
    assert d["pattern"] == "growth" and d["growth_kind"] == "leak", d
    assert d["source"] == "cpu"
    for rate in (d["growth_per_step"], d["held_per_step"]):
        assert abs(rate - LEAK) <= LEAK // 10, "rate %d B/step, leaked %d" % (rate, LEAK)
    assert "host memory (RSS): growth: peak +4 MiB/step" in text, text
    assert "(+4 MiB/step)" in text and "look for objects kept across steps" in text
    assert "largest part" not in text and "optimizer step allocated" not in text, \
        "allocator-only lines on a CPU run:\n" + text
    del kept[:]


def no_leak(proc, text):
    """A run that keeps nothing across steps: not called a leak."""
    d = proc["diagnosis"]
    assert d["source"] == "cpu"
    assert d["growth_kind"] != "leak", text
    assert d["pattern"] in ("steady", "warmup"), text


def test_gan_with_two_optimizers(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod

    def train(sock):
        nn = torch.nn
        G = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
        D = nn.Sequential(nn.Linear(32, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
        opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
        bce = nn.BCEWithLogitsLoss()
        real = torch.randn(32, 32)
        hd = vramscope.watch(D, opt_d, socket=sock)
        hg = vramscope.watch(G, opt_g, socket=sock)
        for _ in range(24):
            z = torch.randn(32, 16)
            fake = G(z)
            opt_d.zero_grad()
            loss_d = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = bce(D(fake), torch.ones(32, 1))
            loss_g.backward()
            opt_g.step()
        hg.remove()
        hd.remove()

    out = record_in_process(vs_bin, workdir, recorders, train)
    proc = report_json(vs_bin, out)["processes"][0]
    text = report(vs_bin, out)
    check_numbers(proc, text)
    assert proc["steps_total"] == 48, "two optimizer steps an iteration (the step counter is shared)"
    no_leak(proc, text)


def test_checkpointed_model_with_gradient_accumulation(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    from torch.utils.checkpoint import checkpoint

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU())
            self.b = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.GELU())
            self.head = torch.nn.Linear(128, 10)

        def forward(self, x):
            x = checkpoint(self.a, x)
            x = checkpoint(self.b, x)
            return self.head(x)

    def train(sock):
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.randn(32, 64, requires_grad=True), torch.randint(0, 10, (32,))
        with vramscope.watch(model, opt, socket=sock):
            for _ in range(20):
                opt.zero_grad()
                for _ in range(4):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / 4
                    loss.backward()
                opt.step()

    out = record_in_process(vs_bin, workdir, recorders, train)
    proc = report_json(vs_bin, out)["processes"][0]
    text = report(vs_bin, out)
    check_numbers(proc, text)
    assert proc["steps_total"] == 20
    assert all(st["micro"] == 4 for st in proc["steps"]), [st["micro"] for st in proc["steps"]]
    no_leak(proc, text)


DDP = r"""
import os, sys
import torch, torch.distributed as dist
import vramscope
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
with vramscope.watch(model, opt, socket=sys.argv[1]):
    for _ in range(24):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
dist.destroy_process_group()
print("trained", flush=True)
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_ddp_on_gloo_with_two_processes(torch_mod, vs_bin, workdir, recorders):
    if not torch_mod.distributed.is_available():
        pytest.skip("torch.distributed is not built")
    out, sock = os.path.join(workdir, "run.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    script = os.path.join(workdir, "ddp.py")
    with open(script, "w") as f:
        f.write(DDP)
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.join(ROOT, "pyhook"))
        procs.append(subprocess.Popen([sys.executable, script, sock], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for p in procs:
        output = p.communicate(timeout=240)[0].decode("utf-8", "replace")
        assert p.returncode == 0 or (TEARDOWN_ABORT in output and "trained" in output), output
    rec.wait_for(lambda msgs: sum(m["type"] == "goodbye" for m in msgs) == 2, "both goodbyes")
    code, err = rec.stop()
    assert code == 0, err
    rep = report_json(vs_bin, out)
    text = report(vs_bin, out)
    assert sorted(p["rank"] for p in rep["processes"]) == [0, 1]
    for proc in rep["processes"]:
        assert proc["world_size"] == 2 and proc["steps_total"] == 24
        check_numbers(proc, None)
        no_leak(proc, text)
    check_numbers(rep["processes"][0], text)  # both tables: no dash in steps 0-2
