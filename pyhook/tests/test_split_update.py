"""One model split between optimizers that all update it each step (Muon
for the matrices, AdamW for the rest): ``watch(model, [muon, adamw])``
makes one step per update, whose ``step`` phase holds every optimizer's
update, and the anatomy counts every optimizer's state (docs/hook.md,
"Loop shapes")."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

import vramscope
from conftest import ROOT, make_config, queued
from frameworks import Recording
from vramscope import _client, _watch


def split_model(torch):
    """A body of matrices and a head of a norm and a biased linear, as
    Muon and AdamW split a transformer's parameters."""
    body = torch.nn.Sequential(torch.nn.Linear(16, 32, bias=False), torch.nn.ReLU(),
                               torch.nn.Linear(32, 16, bias=False))
    head = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    return torch.nn.Sequential(body, head), body, head


def matrix_optimizer(torch, params):
    """torch's own Muon where it has one (torch >= 2.9), else SGD with
    momentum, whose state is Muon's too: one momentum buffer per matrix."""
    muon = getattr(torch.optim, "Muon", None)
    if muon is not None:
        return muon(params, lr=0.02)
    return torch.optim.SGD(params, lr=0.02, momentum=0.95)


def state_bytes(torch, *optimizers):
    """The bytes of every tensor in the optimizers' state, each storage once."""
    seen = {}
    for opt in optimizers:
        for st in opt.state.values():
            for v in st.values():
                if torch.is_tensor(v):
                    seen[v.data_ptr()] = v.numel() * v.element_size()
    return sum(seen.values())


class Timed:
    """An optimizer's step() that notes when it is called and returns."""

    def __init__(self, opt, log, name):
        self.opt, self.log, self.name = opt, log, name

    def step(self):
        self.log.append((self.name, "call", time.monotonic()))
        self.opt.step()
        self.log.append((self.name, "return", time.monotonic()))


def phases_by_step(msgs):
    out = {}
    for m in msgs:
        if m["type"] == "phase" and not m.get("user"):
            out.setdefault(m["step"], []).append((m["name"], m["edge"], m["t"]))
    return out


def train(torch, steps=6, order=("matrices", "rest"), zero="before", skip=None, every=1):
    """Train the split model under one watch of both optimizers; returns
    the queued messages, the optimizers and the timed step calls. ``skip``:
    (step, name) of an optimizer that skips its update there."""
    model, body, head = split_model(torch)
    mats = matrix_optimizer(torch, body.parameters())
    rest = torch.optim.AdamW(head.parameters(), lr=1e-3)
    client = _client.Client(make_config(activations_every=every), start=False)
    watcher = _watch.Watcher(torch, client, model, mats, client.config, others=(rest,))
    log = []
    opts = {"matrices": Timed(mats, log, "matrices"), "rest": Timed(rest, log, "rest")}
    x = torch.randn(8, 16)
    for i in range(steps):
        if zero == "before":
            mats.zero_grad()
            rest.zero_grad()
        model(x).pow(2).mean().backward()
        for name in order:
            if skip != (i, name):
                opts[name].step()
                if zero == "each":  # for opt in opts: opt.step(); opt.zero_grad()
                    opts[name].opt.zero_grad()
        if zero == "after":
            model.zero_grad()
    watcher.remove()
    return queued(client), (mats, rest), log


@pytest.mark.parametrize("order", [("matrices", "rest"), ("rest", "matrices")])
@pytest.mark.parametrize("zero", ["before", "after", "each"])
def test_a_split_update_is_one_step_whose_phase_holds_every_optimizer_s_update(
        torch_mod, order, zero):
    torch = torch_mod
    msgs, opts, log = train(torch, order=order, zero=zero)
    steps = phases_by_step(msgs)
    assert sorted(steps) == list(range(6))
    calls = [t for _, what, t in log if what == "call"]
    for i, edges in steps.items():
        names = [n for n, e, _ in edges if e == "begin"]
        # each optimizer zeroed right after its update: a zero_grad between
        # the two updates, inside the step
        assert names.count("step") == (2 if zero == "each" else 1), (i, names)
        assert names.count("forward") == 1 and names.count("backward") == 1, (i, names)
        begin = next(t for n, e, t in edges if n == "step" and e == "begin")
        end = [t for n, e, t in edges if n == "step" and e == "end"][-1]
        # the phase opens in the first optimizer's step() and ends in the last's
        assert calls[2 * i] <= begin <= calls[2 * i + 1] <= end, i
    anatomy = [m for m in msgs if m["type"] == "anatomy"]
    assert [m["step"] for m in anatomy] == list(range(6))
    assert anatomy[-1]["optimizer"] == state_bytes(torch, *opts) > state_bytes(torch, opts[0])


def test_an_optimizer_that_skips_its_update_still_makes_one_step_per_iteration(torch_mod):
    """A mixed-precision scaler skips an optimizer's step() on an overflow
    in its gradients: the step ends where the next one begins."""
    torch = torch_mod
    msgs, _, _ = train(torch, skip=(2, "rest"))
    steps = phases_by_step(msgs)
    assert sorted(steps) == list(range(6))
    for i, edges in steps.items():
        assert [n for n, e, _ in edges if e == "begin"].count("step") == 1, i


def test_a_process_that_exits_inside_a_split_update_ends_its_step(vs_bin, workdir, recorders):
    """The last update's second optimizer skips its step and the process
    exits without remove(): the step ends at the exit, as the next step's
    first phase would have ended it, and the run ends as it did, not in a
    step that never finished."""
    rec = Recording(vs_bin, workdir, recorders, "split-exit")
    script = textwrap.dedent("""
        import sys, torch, vramscope
        sys.path.insert(0, %r)
        from test_split_update import matrix_optimizer, split_model
        model, body, head = split_model(torch)
        mats = matrix_optimizer(torch, body.parameters())
        rest = torch.optim.AdamW(head.parameters(), lr=1e-3)
        vramscope.watch(model, [mats, rest], socket=%r)
        for i in range(3):
            mats.zero_grad(); rest.zero_grad()
            model(torch.randn(8, 16)).pow(2).mean().backward()
            mats.step()
            if i < 2:
                rest.step()
    """) % (os.path.join(ROOT, "pyhook", "tests"), rec.sock)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "pyhook"))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    got = rec.process()
    assert got["steps_total"] == 3, got["steps"]
    end = got["diagnosis"]["end"]
    assert end["goodbye"] and not end["abrupt"], end


def test_the_anatomy_of_a_plain_step_counts_both_optimizers_through_the_caches(torch_mod):
    torch = torch_mod
    msgs, opts, _ = train(torch, steps=8, every=100)
    anatomy = [m for m in msgs if m["type"] == "anatomy"]
    assert anatomy and all(m["optimizer"] == state_bytes(torch, *opts) for m in anatomy)


def test_watch_takes_a_list_of_optimizers(torch_mod, tmp_path):
    torch = torch_mod
    model, body, head = split_model(torch)
    mats = matrix_optimizer(torch, body.parameters())
    rest = torch.optim.AdamW(head.parameters(), lr=1e-3)
    h = vramscope.watch(model, [mats, rest], socket=str(tmp_path / "none.sock"))
    try:
        assert h.watcher.optimizers() == [mats, rest]
        model(torch.randn(4, 16)).sum().backward()
        mats.step()
        assert h.watcher._open == "step"  # the update goes on with AdamW's
        rest.step()
        assert h.watcher._open is None and h.watcher.idle
    finally:
        h.remove()
    single = vramscope.watch(model, (mats,), socket=str(tmp_path / "none.sock"))
    try:
        assert single.watcher.optimizers() == [mats] and single.watcher._fast_loop
    finally:
        single.remove()


@pytest.mark.parametrize("bad, says", [
    ([], "empty"),
    (["sgd"], "every optimizer in the list"),
    ([None], "every optimizer in the list"),
    ("twice", "twice"),
])
def test_a_bad_list_of_optimizers_is_a_value_error_before_anything_is_hooked(
        torch_mod, tmp_path, bad, says):
    torch = torch_mod
    model, body, _ = split_model(torch)
    opt = torch.optim.SGD(body.parameters(), lr=0.1)
    if bad == "twice":
        bad = [opt, opt]
    with pytest.raises(ValueError, match=says):
        vramscope.watch(model, bad, socket=str(tmp_path / "none.sock"))
    assert vramscope._api.watched() == []


def test_watching_one_of_the_optimizers_again_replaces_the_split_watch(torch_mod, tmp_path):
    torch = torch_mod
    model, body, head = split_model(torch)
    mats = matrix_optimizer(torch, body.parameters())
    rest = torch.optim.AdamW(head.parameters(), lr=1e-3)
    sock = str(tmp_path / "none.sock")
    first = vramscope.watch(model, [mats, rest], socket=sock)
    other = torch.nn.Linear(2, 2)
    with pytest.warns(RuntimeWarning, match="replaced"):
        second = vramscope.watch(other, rest, socket=sock)
    try:
        assert first.watcher is None and vramscope._api.watched() == [second.watcher]
    finally:
        second.remove()
