"""A step whose phase raised, in a loop that catches the error and goes on
(fairseq skips a batch that ran out of memory; a loop skips a bad batch):
the phase's end edge says ``failed``, the step ends there, and the loop's
next zero_grad or training forward belongs to the next step (docs/hook.md,
"A step that failed"). Out-of-memory errors come from the simulated
allocator (bench/fakecuda.py), whose observer torch's own would be."""

import os
import sys

import pytest

from conftest import ROOT, make_config, queued
from vramscope import _client, _cuda, _oom, _watch

sys.path.insert(0, os.path.join(ROOT, "bench"))
import fakecuda  # noqa: E402

MIB = 1 << 20


def make_net(torch, fail):
    """A model whose forward raises while ``fail[0]`` says how: "error" (a
    bad batch) or a callable (the allocator asked for too much)."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 16)
            self.b = torch.nn.Linear(16, 4)

        def forward(self, x, depth=0):
            h = self.a(x).relu()
            if fail[0] == "error":
                raise RuntimeError("a bad batch")
            if callable(fail[0]):
                fail[0]()
            if depth:  # the model calls itself: a forward inside its forward
                return self(h[:, :8], depth - 1)
            return self.b(h)

    return Net()


def phases(client):
    return [(m["name"], m["edge"], m["step"], m.get("failed"))
            for m in queued(client) if m["type"] == "phase"]


def failed(client):
    return [p for p in phases(client) if p[3]]


def stepped(client):
    """The steps whose optimizer step ended."""
    return [p[2] for p in phases(client) if p[:2] == ("step", "end") and not p[3]]


def forwards(client, step):
    return sum(1 for p in phases(client) if p[:3] == ("forward", "begin", step))


def make_opt(torch, params):
    """SGD whose step() first runs ``fail`` once where the loop set it (an
    allocation for the update the device has no room for, as Adam's state
    on its first step; or any other error). On torch 2.x the subclass's
    step() and SGD's run the step hooks nested."""

    class SGD(torch.optim.SGD):
        fail = None

        def step(self, closure=None):
            fail, self.fail = self.fail, None
            if fail is not None:
                fail()
            return super().step(closure)

    return SGD(params, lr=0.01)


def build(torch, fail, cuda=None):
    model = make_net(torch, fail)
    opt = make_opt(torch, model.parameters())
    client = _client.Client(make_config(), cuda=cuda, start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    return model, opt, client, watcher


def loop(torch, model, opt, steps, failing, how, fail, zero="first", cleanup=True, where=None):
    """``steps`` iterations; at iteration ``failing`` the phase ``where``
    raises ``how`` (set in fail), the loop catches it and goes on."""
    for i in range(steps):
        fail[0] = how if i == failing and where in (None, "forward") else None
        try:
            if zero == "first":
                opt.zero_grad()
            loss = model(torch.randn(4, 8)).pow(2).mean()
            if i == failing and where == "loss":
                how()
            if i == failing and where == "backward":
                loss = _Huge.apply(loss, how)
            loss.backward()
            if i == failing and where == "step":
                opt.fail = how
            opt.step()
            if zero == "after":
                opt.zero_grad()
        except RuntimeError:
            fail[0] = None
            if cleanup:
                opt.zero_grad()


class _Huge:
    """An autograd function whose backward runs ``then`` (an allocation
    the device has no room for)."""

    apply = None


def _huge_fn(torch):
    class Huge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, then):
            ctx.then = then
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            ctx.then()
            return g, None

    return Huge


@pytest.mark.parametrize("zero,cleanup", [("first", True), ("first", False), ("after", True),
                                          ("after", False)],
                         ids=["zero-first", "zero-first-continue", "zero-after",
                              "zero-after-continue"])
def test_a_forward_that_raised_ends_its_step_as_failed(torch_mod, zero, cleanup):
    """Iteration 3 of 6 raises in the forward (after five steps at rest:
    the fast paths); the loop zeroes in its except clause or just goes on."""
    fail = [None]
    model, opt, client, _ = build(torch_mod, fail)
    loop(torch_mod, model, opt, 6, 3, "error", fail, zero=zero, cleanup=cleanup)
    assert failed(client) == [("forward", "end", 3, "error")]
    assert stepped(client) == [0, 1, 2, 4, 5]
    # The next iteration's forward is its step's own, never taken for a
    # forward inside the one that raised.
    assert [forwards(client, s) for s in (3, 4, 5)] == [1, 1, 1]
    assert ("loss", "begin", 4, None) in phases(client)


@pytest.mark.parametrize("zero,cleanup", [("first", True), ("first", False), ("after", True),
                                          ("after", False)],
                         ids=["zero-first", "zero-first-continue", "zero-after",
                              "zero-after-continue"])
def test_an_update_that_raised_ends_its_step_as_failed(torch_mod, zero, cleanup):
    """Iteration 3 of 6 raises in optimizer.step() (after steps at rest:
    the fast paths), and the loop goes on: that step failed in ``step``;
    it never updated, and the next forward is the next step's."""
    fail = [None]
    model, opt, client, _ = build(torch_mod, fail)

    def bad():
        raise RuntimeError("a bad update")

    loop(torch_mod, model, opt, 6, 3, bad, fail, zero=zero, cleanup=cleanup, where="step")
    assert failed(client) == [("step", "end", 3, "error")]
    assert stepped(client) == [0, 1, 2, 4, 5]
    assert [forwards(client, s) for s in (3, 4, 5)] == [1, 1, 1]


def test_an_update_that_raised_ends_the_run_in_its_step(torch_mod):
    """The loop does not catch it: the process dies in that step, which
    neither finished nor failed as a loop that goes on would show."""
    fail = [None]
    model, opt, client, _ = build(torch_mod, fail)

    def bad():
        raise RuntimeError("a bad update")

    with pytest.raises(RuntimeError):
        for i in range(4):
            opt.zero_grad()
            model(torch_mod.randn(4, 8)).pow(2).mean().backward()
            if i == 2:
                opt.fail = bad
            opt.step()
    assert stepped(client) == [0, 1]
    assert not failed(client)
    assert phases(client)[-1] == ("step", "begin", 2, None)


def test_a_model_that_calls_itself_fails_nothing(torch_mod):
    fail = [None]
    model, opt, client, _ = build(torch_mod, fail)
    for _ in range(4):
        opt.zero_grad()
        model(torch_mod.randn(4, 8), depth=1).pow(2).mean().backward()
        opt.step()
    assert not failed(client)
    assert stepped(client) == [0, 1, 2, 3]
    assert [forwards(client, s) for s in range(4)] == [1, 1, 1, 1]


@pytest.fixture
def sim(torch_mod, monkeypatch):
    """The simulated allocator installed, with torch's out-of-memory observer
    routed to the hook (as watch() routes it), and a device limit."""
    s = fakecuda.SimAllocator(script=((0, 0), {}))
    s.install(torch_mod)
    monkeypatch.setattr(_oom, "_state", {"client": None, "phase": None, "observer": False,
                                         "error": False, "sent": False})
    s.limit = 1024 * MIB
    try:
        yield s
    finally:
        s.uninstall()


@pytest.mark.parametrize("where", ["forward", "loss", "backward", "step"])
def test_an_out_of_memory_error_the_loop_caught_ends_its_step_as_failed(torch_mod, sim, where):
    torch = torch_mod
    fail = [None]
    model, opt, client, watcher = build(torch, fail, cuda=_cuda.CudaStats(torch, 0))
    _oom.install(torch, client, watcher.failing_phase)
    huge = lambda: sim.malloc(2048 * MIB)  # noqa: E731 - past the device's 1 GiB
    _Huge.apply = _huge_fn(torch).apply
    loop(torch, model, opt, 6, 3, huge, fail, where=where)
    assert failed(client) == [(where, "end", 3, "oom")]
    assert stepped(client) == [0, 1, 2, 4, 5]
    assert [forwards(client, s) for s in (3, 4, 5)] == [1, 1, 1]
    # The failed edge carries the step's closing read: its peak is known.
    edge = [m for m in queued(client) if m.get("failed")][0]
    assert edge["mem"] is not None and "same_as" not in edge


def test_an_evaluation_forward_that_raised_fails_no_step(torch_mod):
    """An evaluation under no_grad between steps whose forward raised (the
    loop skips the batch) is no training step's; the next training forward,
    in a loop that zeroes after the update, is seen as its step's own."""
    torch = torch_mod
    fail = [None]
    model, opt, client, _ = build(torch, fail)
    for i in range(5):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        if i == 2:
            fail[0] = "error"
            with torch.no_grad():
                try:
                    model(torch.randn(4, 8))
                except RuntimeError:
                    pass
            fail[0] = None
    assert not failed(client)
    assert stepped(client) == [0, 1, 2, 3, 4]
    assert [forwards(client, s) for s in range(5)] == [1, 1, 1, 1, 1]


def test_a_training_function_retried_with_a_smaller_batch_keeps_its_loop_shape(torch_mod):
    """accelerate's find_executable_batch_size (the HF Trainer's
    auto_find_batch_size): the training function zeroes once before its
    loop and after every update; its first two calls fail at their first
    forward and it is called again. Each failed call is a failed step, and
    the loop that then runs is read as one that zeroes after its update:
    no step of a lone zero_grad at the end."""
    torch = torch_mod
    fail = [None]
    model, opt, client, _ = build(torch, fail)

    def train(batch):
        opt.zero_grad()
        for _ in range(4):
            model(torch.randn(batch, 8)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()

    for batch in (16, 8, 4):
        fail[0] = "error" if batch > 4 else None
        try:
            train(batch)
        except RuntimeError:
            continue
    assert failed(client) == [("forward", "end", 0, "error"), ("forward", "end", 1, "error")]
    assert stepped(client) == [2, 3, 4, 5]
    assert phases(client)[-2:] == [("zero_grad", "begin", 5, None), ("zero_grad", "end", 5, None)]
