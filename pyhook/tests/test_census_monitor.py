"""A leaky training script, attached with ``watch()`` under ``vramscope
record`` and run unmodified under ``vramscope run``, gets a headline naming
the holder, what it holds and its bytes per step: the real monitor's
diagnosis sees memory held between steps grow, asks the hook for a census,
and compares it with the follow-up (docs/census.md)."""

import json
import os
import subprocess
import sys

from conftest import ROOT, Recorder

LEAK = r"""
import time, torch
%(watch)s
torch.manual_seed(0)

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(512, 512)
        self.cache = []

    def forward(self, x):
        y = self.lin(x)
        self.cache.append(y.detach())  # the leak: 1 MiB a step
        return y

model = torch.nn.Sequential(Encoder(), torch.nn.ReLU(), torch.nn.Linear(512, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
%(attach)s
for step in range(120):
    loss = model(torch.randn(512, 512)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.04)
"""


def _headline(vs_bin, rec):
    out = subprocess.run([vs_bin, "report", "--json", rec], capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    procs = json.loads(out.stdout)["processes"]
    assert len(procs) == 1
    return procs[0]


def _check(proc, script):
    d = proc["diagnosis"]
    h = d["headline"]
    with open(script) as f:
        line = [i + 1 for i, s in enumerate(f) if "# the leak" in s][0]
    assert h.startswith("held by Encoder.cache[...] (list) %s:%d keeps +1 tensor and 1 MiB per step"
                        % (os.path.basename(script), line)), h
    c = d["culprits"]
    assert c["to_step"] - c["from_step"] == 5
    assert [g["name"] for g in c["grew"]] == ["Encoder.cache[...]"]
    assert c["grew"][0]["bytes_per_step"] == 512 * 512 * 4
    assert proc["census"]["reason"] == "followup"


def test_watch_under_record_gets_the_holder(torch_mod, vs_bin, workdir):
    script = os.path.join(workdir, "train.py")
    with open(script, "w") as f:
        f.write(LEAK % {"watch": "import vramscope", "attach": "vramscope.watch(model, opt)"})
    sock, rec = os.path.join(workdir, "m.sock"), os.path.join(workdir, "r.jsonl")
    monitor = Recorder(vs_bin, rec, sock)
    try:
        env = dict(os.environ, VRAMSCOPE_SOCKET=sock, PYTHONPATH=os.path.join(ROOT, "pyhook"))
        proc = subprocess.run([sys.executable, script], env=env, capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    finally:
        monitor.stop()
    with open(rec) as f:
        notes = [json.loads(line)["note"] for line in f if '"note"' in line]
    asked = [n for n in notes if n["kind"] == "request"]
    # A held-memory suspicion asks (suspect.Asker): "grows" when the live
    # diagnosis already reads a leak at its first turn, a rise "to a new
    # level" when it holds too few steps for that yet (how many depends on
    # the machine's load: one CI run in several on a loaded machine); either
    # way the follow-up names the holder (_check).
    assert asked and asked[0]["text"].startswith(
        ("asked for a census (held memory grows): ",
         "asked for a census (held memory rose to a new level at step ")), asked[0]["text"]
    _check(_headline(vs_bin, rec), script)


def test_unmodified_script_under_run_gets_the_holder(torch_mod, vs_bin, workdir):
    script = os.path.join(workdir, "train.py")
    with open(script, "w") as f:
        f.write(LEAK % {"watch": "", "attach": ""})
    rec = os.path.join(workdir, "r.jsonl")
    proc = subprocess.run([vs_bin, "run", "--record", rec, "--", sys.executable, script],
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    _check(_headline(vs_bin, rec), script)


STEADY = r"""
import sys, time, torch, vramscope
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
vramscope.watch(model, opt)
keep = torch.ones(1 << 16)
print("ready", flush=True)
for step in range(400):
    loss = model(torch.randn(8, 64)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.02)
"""


def test_vramscope_census_asks_a_running_process(torch_mod, vs_bin, workdir):
    script = os.path.join(workdir, "train.py")
    with open(script, "w") as f:
        f.write(STEADY)
    sock, rec = os.path.join(workdir, "m.sock"), os.path.join(workdir, "r.jsonl")
    monitor = Recorder(vs_bin, rec, sock)
    try:
        env = dict(os.environ, VRAMSCOPE_SOCKET=sock, PYTHONPATH=os.path.join(ROOT, "pyhook"))
        proc = subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        monitor.wait_for(lambda msgs: any(m["type"] == "phase" for m in msgs), "a phase")
        asked = subprocess.run([vs_bin, "census", "--socket", sock, "--pid", str(proc.pid)],
                               capture_output=True, timeout=30)
        assert asked.returncode == 0, asked.stderr
        assert b"asked the hook of pid %d for a census" % proc.pid in asked.stdout
        monitor.wait_for(lambda msgs: any(m["type"] == "census" for m in msgs), "a census", timeout=30)
        proc.wait(timeout=120)
        bad = subprocess.run([vs_bin, "census", "--socket", sock + ".none", "--pid", "1"],
                             capture_output=True, timeout=30)
        assert bad.returncode != 0 and b"reach the monitor" in bad.stderr
    finally:
        monitor.stop()
    census = [m for m in monitor.messages() if m["type"] == "census"][0]["census"]
    assert census["reason"] == "request"
    assert "keep" in [h["name"] for h in census["holders"]]
    with open(rec) as f:
        notes = [json.loads(line)["note"] for line in f if '"note"' in line]
    assert any(n["kind"] == "request" and "asked by vramscope census" in n["text"] for n in notes)
