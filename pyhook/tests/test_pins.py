"""Pins against the H100 recordings, end to end:
the real Watcher and client, the real ``vramscope record`` and ``report --json``.

seed001: the real seed-001 model (testdata/h100/seed001.py, scaled down to run
on a CPU) in the script's real call order; a fake CUDA seam returns, at each
moment, what the run's own prints (testdata/h100/s001_stat_cuda.json) say the
allocator held then. The allocator state changes inside the calls that change
it (zero_grad, forward, the loss, backward, the update), so each phase edge
the hook reads sees the state before or after that work, as on the GPU.
"""

import importlib.util
import json
import os

from conftest import ROOT, FakeCuda, checkpoint
from test_e2e import has_goodbye, report_json, start, stop_ok, the_process
import vramscope
from vramscope import _api, _client, _oom
from vramscope._schedule import FIRST_MEASURED

H100 = os.path.join(ROOT, "testdata", "h100")
# The previous step's logits are still alive at the end of forward and freed
# only when ``logit = model(x, y)`` rebinds the name, after the hook's read and
# before the script's print: the real hook's forward end in s001.jsonl.gz is
# 3,557,512,704 B on steps 1-5 against the print's 3,077,264,896 B.
OLD_LOGITS = 3557512704 - 3077264896  # 480,247,808 B: 80 x 50 x 30,000 fp32, as allocated


def load_seed():
    spec = importlib.util.spec_from_file_location("seed001", os.path.join(H100, "seed001.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def truth():
    with open(os.path.join(H100, "s001_stat_cuda.json")) as f:
        rows = json.load(f)
    return {(r["step"], r["phase"]): r for r in rows}


class PrintedAllocator(FakeCuda):
    """The allocator as the prints saw it; ``set`` moves it to a printed row."""

    def __init__(self):
        super().__init__()
        self.mem = None

    def set(self, row, extra=0):
        self.mem = {"allocated": row["allocated"] + extra, "max_allocated": row["max_allocated"],
                    "reserved": row["reserved"], "max_reserved": row["max_reserved"],
                    "alloc_retries": 0, "ooms": 0}

    def read(self):
        self.reads += 1
        return dict(self.mem)

    def device_info(self):
        return {"index": 0, "uuid": "GPU-794fb573-dbc6-e71a-521b-d1ed3fe096cd",
                "name": "NVIDIA H100 80GB HBM3", "total": 85520809984}


def test_seed001_phase_ends_match_the_prints_and_the_peak_is_in_backward(
        torch_mod, vs_bin, workdir, recorders, monkeypatch):  # noqa: F811
    torch = torch_mod
    seed = load_seed()
    rows = truth()
    steps = max(s for s, _ in rows) + 1
    cuda = PrintedAllocator()
    cuda.set(rows[(-1, "beginning")])
    monkeypatch.setattr(_api, "_start", lambda config, model=None: _client.Client(
        config, cuda=cuda, torch_version=torch.__version__))
    # The allocator is faked; torch's real OOM observer would be attached to
    # it, and a CUDA build of torch (2.15's PyPI wheel) without a driver
    # raises there: the hook reported an internal error (a warning).
    monkeypatch.setattr(_oom, "install", lambda *a, **k: None)
    now = {"step": 0}

    # seed001.py's model at 1/50 scale (hidden 20, vocab 600, batch 2): the
    # same modules and call order; the byte figures come from the prints.
    s = 0.02
    a = seed.argparse.Namespace(attention_size=int(1000 * s), hidden_size=int(1000 * s),
                                input_size=int(500 * s), pad_id=0, vocab_size=int(30000 * s),
                                batch_size=max(2, int(80 * s)), eos_id=1)

    class Seed(seed.Seq2Seq):
        def zero_grad(self, *args, **kw):
            super().zero_grad(*args, **kw)
            cuda.set(rows[(now["step"], "zero_grad")])

        def forward(self, x_in, y_in):
            out = super().forward(x_in, y_in)
            cuda.set(rows[(now["step"], "forward")], OLD_LOGITS if now["step"] > 0 else 0)
            return out

    class Adam(torch.optim.Adam):
        def step(self, closure=None):
            out = super().step(closure)
            cuda.set(rows[(now["step"], "step")])
            return out

    torch.manual_seed(0)
    model = Seed(a)
    crit = torch.nn.CrossEntropyLoss(ignore_index=a.pad_id, reduction="sum")
    opt = Adam(model.parameters())
    out, sock = os.path.join(workdir, "seed.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    handle = vramscope.watch(model, opt, socket=sock, sample_hz=0)
    for i in range(steps):
        now["step"] = i
        x = torch.ones(a.batch_size, 50).long() * 2
        y = torch.ones(a.batch_size, 50).long() * 2
        model.zero_grad()
        logit = model(x, y)
        cuda.set(rows[(i, "forward")])  # the rebinding freed the previous logits
        logit = logit.view(-1, logit.size(-1))
        loss = crit(logit, y.view(-1)) / a.batch_size
        cuda.set(rows[(i, "loss")])
        logit.register_hook(lambda g, i=i: cuda.set(rows[(i, "backward")]))
        loss.backward()
        opt.step()
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)

    proc = the_process(report_json(vs_bin, out))
    assert proc["steps_total"] == steps
    for st in proc["steps"]:
        i = st["step"]
        for p in st["phases"]:
            want = rows[(i, p["phase"])]
            extra = OLD_LOGITS if p["phase"] == "forward" and i > 0 else 0
            got = (p["allocated_end"], p["max_allocated_end"], p["reserved_end"])
            if p["phase"] == "zero_grad" and i >= FIRST_MEASURED:
                # zero_grad only frees: its end is read on steps 0-2 only (docs/hook.md, "Cost")
                assert got == (None, None, None), "step %d zero_grad" % i
                continue
            assert got == (want["allocated"] + extra, want["max_allocated"], want["reserved"]), \
                "step %d %s" % (i, p["phase"])
    totals = proc["totals"]
    assert totals["peak_allocated"] == rows[(1, "backward")]["max_allocated"] == 4518008832
    assert (totals["peak_allocated_step"], totals["peak_allocated_phase"]) == (1, "backward")
    loss0 = [p for p in proc["steps"][0]["phases"] if p["phase"] == "loss"][0]
    assert loss0["peak_allocated"] <= rows[(0, "loss")]["max_allocated"], \
        "the loss phase holds only the loss computation's peak"


def test_checkpointing_session_with_evals_reports_eight_steps(
        torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    """clients.jsonl.gz's ckpt_accum session: activation checkpointing, 4-way
    gradient accumulation, SGD momentum, StepLR and ``vramscope.phase("eval")``
    under ``no_grad`` after each of 8 optimizer steps (it was reported as 9)."""
    torch = torch_mod

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(3))
            self.head = torch.nn.Linear(32, 10)

        def forward(self, x):
            for b in self.blocks:
                x = checkpoint(torch, lambda t, b=b: b(t).relu(), x)
            return self.head(x)

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    out, sock = os.path.join(workdir, "ckpt.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    handle = vramscope.watch(model, opt, socket=sock)
    x = torch.randn(16, 32, requires_grad=True)
    y = torch.randint(0, 10, (16,))
    for _ in range(8):
        opt.zero_grad()
        for _ in range(4):
            loss = torch.nn.functional.cross_entropy(model(x), y) / 4
            loss.backward()
        opt.step()
        sched.step()
        with vramscope.phase("eval"), torch.no_grad():
            model(torch.randn(64, 32))
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)

    proc = the_process(report_json(vs_bin, out))
    assert proc["steps_total"] == 8
    for st in proc["steps"]:
        names = [p["phase"] for p in st["phases"]]
        assert names == ["zero_grad", "forward", "loss", "backward", "step", "eval"], names
        counts = {p["phase"]: p["count"] for p in st["phases"]}
        assert counts["forward"] == counts["backward"] == 4 and counts["eval"] == 1
    assert proc["anatomy"]["measured"]["batch_size"] == 16, "not the eval batch of 64"


def test_zero_grad_after_the_update_reports_one_step_per_update(
        torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    out, sock = os.path.join(workdir, "tail.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    handle = vramscope.watch(model, opt, socket=sock)
    for _ in range(4):
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)
    proc = the_process(report_json(vs_bin, out))
    assert proc["steps_total"] == 4
    for st in proc["steps"]:
        assert [p["phase"] for p in st["phases"]] == ["forward", "loss", "backward", "step",
                                                     "zero_grad"]
