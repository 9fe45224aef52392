"""Phase detection with real autograd on CPU."""

import pytest

from conftest import make_config, queued
from vramscope import _client, _watch

AUTO = ("zero_grad", "forward", "loss", "backward", "step")


def mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def build(torch, opt_cls=None, **watch_kw):
    model = mlp(torch)
    opt = (opt_cls or torch.optim.SGD)(model.parameters(), lr=0.01)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config, **watch_kw)
    return model, opt, client, watcher


def train(torch, model, opt, steps=3, micro=1, calls=1):
    for _ in range(steps):
        opt.zero_grad()
        for _ in range(micro):
            outs = [model(torch.randn(4, 8)) for _ in range(calls)]
            sum(o.pow(2).mean() for o in outs).backward()
        opt.step()


def spans(client):
    """(name, edge, step, micro) of every phase message, in seq order."""
    return [(m["name"], m["edge"], m["step"], m["micro"])
            for m in queued(client) if m["type"] == "phase"]


def expected_step(step, micro=1, calls=1):
    out = [("zero_grad", "begin", step, 0), ("zero_grad", "end", step, 0)]
    for k in range(micro):
        for _ in range(calls):
            out += [("forward", "begin", step, k), ("forward", "end", step, k),
                    ("loss", "begin", step, k), ("loss", "end", step, k)]
        out += [("backward", "begin", step, k), ("backward", "end", step, k)]
    out += [("step", "begin", step, micro), ("step", "end", step, micro)]
    return out


def test_order_of_phases_per_step(torch_mod):
    model, opt, client, _ = build(torch_mod)
    train(torch_mod, model, opt, steps=3)
    assert spans(client) == expected_step(0) + expected_step(1) + expected_step(2)
    seqs = [m["seq"] for m in queued(client)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_gradient_accumulation_counts_micro_steps(torch_mod):
    model, opt, client, _ = build(torch_mod)
    train(torch_mod, model, opt, steps=2, micro=2)
    assert spans(client) == expected_step(0, micro=2) + expected_step(1, micro=2)


def test_model_called_twice_per_step_gives_two_forwards_one_backward(torch_mod):
    model, opt, client, _ = build(torch_mod)
    train(torch_mod, model, opt, steps=2, calls=2)
    assert spans(client) == expected_step(0, calls=2) + expected_step(1, calls=2)


def test_loss_from_several_outputs_is_one_backward(torch_mod):
    torch = torch_mod

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(8, 8)
            self.a = torch.nn.Linear(8, 2)
            self.b = torch.nn.Linear(8, 3)

        def forward(self, x):
            h = self.body(x).relu()
            return {"a": self.a(h), "b": (self.b(h), h)}

    model = TwoHeads()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(2):
        opt.zero_grad()
        out = model(torch.randn(4, 8))
        (out["a"].sum() + out["b"][0].pow(2).sum()).backward()
        opt.step()
    assert spans(client) == expected_step(0) + expected_step(1)


@pytest.mark.parametrize("before", [True, False], ids=["scheduler-first", "watch-first"])
def test_lr_scheduler_keeps_working_and_remove_is_safe(torch_mod, before, recwarn):
    torch = torch_mod
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    client = _client.Client(make_config(), start=False)
    if before:
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    watcher = _watch.Watcher(torch, client, model, opt, client.config, step_hooks=False)
    if not before:
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        train(torch, model, opt, steps=1)
        sched.step()
    assert spans(client) == expected_step(0) + expected_step(1) + expected_step(2)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.125)
    watcher.remove()
    n = len(queued(client))
    for _ in range(2):
        train(torch, model, opt, steps=1)
        sched.step()
    assert len(queued(client)) == n, "an inert wrapper must not emit"
    assert opt.param_groups[0]["lr"] == pytest.approx(0.03125)
    msgs = [str(w.message) for w in recwarn]
    assert not [m for m in msgs if "lr_scheduler" in m or "overridden" in m], msgs


def test_eval_under_no_grad_opens_no_loss_and_leaves_nothing_open(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)
    train(torch, model, opt, steps=1)
    with torch.no_grad():
        model(torch.randn(2, 8))
        model(torch.randn(2, 8))
    train(torch, model, opt, steps=1)
    got = spans(client)
    evals = [("forward", "begin", 1, 0), ("forward", "end", 1, 0)] * 2
    assert got == expected_step(0) + evals + expected_step(1)


def test_remove_restores_everything_and_is_idempotent(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    assert "step" in opt.__dict__ and "zero_grad" in opt.__dict__
    assert "zero_grad" in model.__dict__
    assert len(model._forward_hooks) == 1 and len(model._forward_pre_hooks) == 1
    train(torch, model, opt, steps=1)
    model(torch.randn(2, 8))  # leaves "loss" open
    watcher.remove()
    watcher.remove()
    assert "step" not in opt.__dict__ and "zero_grad" not in opt.__dict__
    assert "zero_grad" not in model.__dict__
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert opt.step.__func__ is type(opt).step
    n = len(queued(client))
    assert spans(client)[-1] == ("loss", "end", 1, 0), "remove closes the open phase"
    out = model(torch.randn(2, 8))  # a backward through an output hooked before remove
    out.sum().backward()
    train(torch, model, opt, steps=1)
    assert len(queued(client)) == n


def test_model_zero_grad_is_a_phase_too(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)
    model.zero_grad()
    assert spans(client) == [("zero_grad", "begin", 0, 0), ("zero_grad", "end", 0, 0)]


def make_hooked_sgd(torch):
    """An SGD with torch-2-style step hooks, so the hook path runs on torch 1.13 too."""

    class _Handle:
        def __init__(self, hooks, fn):
            self.hooks, self.fn = hooks, fn

        def remove(self):
            if self.fn in self.hooks:
                self.hooks.remove(self.fn)

    class StepHookSGD(torch.optim.SGD):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.pre, self.post = [], []

        def register_step_pre_hook(self, fn):
            self.pre.append(fn)
            return _Handle(self.pre, fn)

        def register_step_post_hook(self, fn):
            self.post.append(fn)
            return _Handle(self.post, fn)

        def step(self, closure=None):
            for fn in list(self.pre):
                fn(self, (), {})
            out = super().step(closure)
            for fn in list(self.post):
                fn(self, (), {})
            return out

    return StepHookSGD


@pytest.mark.parametrize("force", [None, False], ids=["detected", "forced-off"])
def test_step_hook_path_and_its_fallback(torch_mod, force):
    torch = torch_mod
    model = mlp(torch)
    opt = make_hooked_sgd(torch)(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config, step_hooks=force)
    assert watcher.uses_step_hooks is (force is None)
    assert ("step" in opt.__dict__) is (force is False)
    assert len(opt.pre) == (1 if force is None else 0)
    train(torch, model, opt, steps=2)
    assert spans(client) == expected_step(0) + expected_step(1)
    watcher.remove()
    assert opt.pre == [] and opt.post == [] and "step" not in opt.__dict__


def test_without_queue_callback_backward_ends_at_the_next_phase(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch, queue_callback=None)
    train(torch, model, opt, steps=2, micro=2)
    assert spans(client) == expected_step(0, micro=2) + expected_step(1, micro=2)


def test_no_step_hooks_on_this_torch_means_step_is_wrapped(torch_mod):
    model, opt, client, watcher = build(torch_mod)
    has = hasattr(torch_mod.optim.Optimizer, "register_step_pre_hook")
    assert watcher.uses_step_hooks is has
    assert ("step" in opt.__dict__) is (not has)


def test_forward_that_raises_does_not_wedge_detection(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)
    with pytest.raises(RuntimeError):
        model(torch.randn(4, 7))  # wrong shape: raises inside forward
    train(torch, model, opt, steps=1)
    got = spans(client)
    # the failed forward is closed by the next phase, then a normal step follows
    assert got == [("forward", "begin", 0, 0), ("forward", "end", 0, 0)] + expected_step(0)


def test_user_exceptions_from_step_propagate_unchanged(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)

    def closure():
        raise KeyError("from the user")

    with pytest.raises(KeyError, match="from the user"):
        opt.step(closure)
    assert spans(client) == [("step", "begin", 0, 0), ("step", "end", 0, 0)]
