"""Phase detection with real autograd on CPU."""

import pytest

from conftest import make_config, queued
import stacks
from vramscope import _client, _patch, _watch

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


def test_eval_under_no_grad_between_steps_opens_no_step(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    with torch.no_grad():  # a sanity check before training: no step 0 of its own
        model(torch.randn(2, 8))
    train(torch, model, opt, steps=1)
    assert watcher.idle
    with torch.no_grad():
        model(torch.randn(2, 8))
        model(torch.randn(2, 8))
    assert watcher.idle and client.step == 1
    train(torch, model, opt, steps=1)
    # Each evaluation is a user phase "eval" of the step it follows (step 0
    # for the sanity check), read at both edges; it ends at the next
    # training phase, so the zero_grad after it heads step 1. Still two steps.
    ev = [("eval", "begin", 0, 0), ("eval", "end", 0, 0)]
    assert spans(client) == ev + expected_step(0) + ev + expected_step(1)
    assert [m["user"] for m in queued(client) if m["type"] == "phase" and m["name"] == "eval"] \
        == [True] * 4
    assert not [m for m in queued(client) if "grad" in m]  # under no_grad


def begins_by_step(client):
    """{step: the names of the phases begun in it, in order}"""
    out = {}
    for name, edge, step, _ in spans(client):
        if edge == "begin":
            out.setdefault(step, []).append(name)
    return out


def zero_after(torch, model, opt, steps):
    for _ in range(steps):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


@pytest.mark.parametrize("loop", ["zero_first", "zero_after"])
def test_an_evaluation_without_no_grad_between_steps_is_an_eval(loop, torch_mod):
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    run = train if loop == "zero_first" else zero_after
    run(torch, model, opt, steps=5)  # (test_fast_paths.py: the same on the fast paths)
    model.eval()
    for _ in range(2):  # gradients enabled: the outputs hold graphs until dropped
        model(torch.randn(2, 8)).sum().item()
    model.train()
    assert watcher.idle and client.step == 5
    run(torch, model, opt, steps=2)
    # One user phase "eval" of the step it follows, as under no_grad; no
    # forward, loss or step of its own, and the steps after it as before.
    if loop == "zero_first":
        ev = [("eval", "begin", 4, 0), ("eval", "end", 4, 0)]
        assert spans(client) == sum((expected_step(s) for s in range(5)), []) + ev \
            + expected_step(5) + expected_step(6)
    else:
        steps = begins_by_step(client)
        train_ = ["forward", "loss", "backward", "step", "zero_grad"]
        assert steps == {**{s: train_ for s in range(7) if s != 4}, 4: train_ + ["eval"]}
    assert client.step == 7
    # Its end edge says a forward of it ran with gradients enabled (the
    # report's hint to wrap it in no_grad); only the hook's eval has the field.
    grads = [(m["name"], m["edge"], m.get("grad")) for m in queued(client)
             if m["type"] == "phase" and (m["user"] or "grad" in m)]
    assert grads == [("eval", "begin", None), ("eval", "end", True)]


def test_a_model_trained_in_eval_mode_keeps_its_phases(torch_mod):
    """A model loaded in eval mode (transformers' from_pretrained) that the
    loop never puts in train mode: every forward is a training one."""
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    model.eval()
    zero_after(torch, model, opt, steps=6)
    train_ = ["forward", "loss", "backward", "step", "zero_grad"]
    assert begins_by_step(client) == {s: train_ for s in range(6)}
    assert watcher._eval_trains


def test_a_loop_that_turns_to_training_in_eval_mode_is_learned_at_its_first_backward(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    zero_after(torch, model, opt, steps=4)
    assert not watcher._eval_trains  # a backward showed it trains in train mode
    model.eval()  # from here on it trains in eval mode (dropout off, say)
    zero_after(torch, model, opt, steps=3)
    train_ = ["forward", "loss", "backward", "step", "zero_grad"]
    # Step 4's forward is taken as an evaluation of step 3; its backward
    # shows the model trains in eval mode, and every later forward is a
    # training one again.
    assert begins_by_step(client) == {0: train_, 1: train_, 2: train_, 3: train_ + ["eval"],
                                      4: train_[2:], 5: train_, 6: train_}
    assert watcher._eval_trains and client.step == 7


@pytest.mark.parametrize("by_backward", [False, True])
def test_an_attack_between_steps_is_an_eval_whose_backward_is_none_of_a_steps(
        by_backward, torch_mod):
    """Adversarial training: before each step, the model in eval mode on an
    input that requires a gradient (a probe), its gradient taken with
    autograd.grad or backward(): an evaluation, from step 0 on, never
    training in eval mode, and no advice to run it under no_grad."""
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    for _ in range(4):
        model.eval()
        x = torch.randn(4, 8, requires_grad=True)
        loss = model(x).pow(2).mean()
        if by_backward:
            loss.backward()
        else:
            torch.autograd.grad(loss, x)
        model.train()
        train(torch, model, opt, steps=1)
    train_ = ["zero_grad", "forward", "loss", "backward", "step"]
    assert begins_by_step(client) == {0: ["eval"] + train_ + ["eval"], 1: train_ + ["eval"],
                                      2: train_ + ["eval"], 3: train_}
    assert not watcher._eval_trains and client.step == 4
    assert not [m for m in queued(client) if "grad" in m]


def pgd(torch, model, X, by_backward, passes=3, leaf=False):
    """PGD's perturbation of ``X`` with the model as it is (train mode):
    ``passes`` ascent steps on ``X + delta`` (or, ``leaf``, on a leaf
    ``x_adv``), each gradient to the perturbation taken with backward() or
    autograd.grad; returns the adversarial batch."""
    delta = torch.zeros_like(X, requires_grad=True)
    for _ in range(passes):
        x = (X + delta).detach().requires_grad_() if leaf else X + delta
        loss = model(x).pow(2).mean()
        src = x if leaf else delta
        if by_backward:
            loss.backward()
            g = src.grad
        else:
            g, = torch.autograd.grad(loss, [src])
        delta = (delta + 0.01 * g.sign()).detach().requires_grad_()
    return (X + delta).detach()


@pytest.mark.parametrize("by_backward", [False, True])
@pytest.mark.parametrize("zero_first", [True, False])
@pytest.mark.parametrize("leaf", [False, True])
def test_an_attack_in_train_mode_is_passes_of_the_step_it_trains(
        by_backward, zero_first, leaf, torch_mod):
    """Adversarial training with the model left in train mode (PGD before
    each update, the gradient to the perturbation taken with backward(),
    which accumulates the parameters' gradients until the zero_grad, or
    with autograd.grad): each attack pass is a forward, loss and backward
    of the step that trains on its result, never a step of its own that
    skipped its update, in a loop that zeroes first or after."""
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    for _ in range(5):
        x = pgd(torch, model, torch.randn(4, 8), by_backward, leaf=leaf)
        if zero_first:
            opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        if not zero_first:
            opt.zero_grad()
    attack = ["forward", "loss", "backward"] * 3
    train_ = ["forward", "loss", "backward", "step"]
    got = begins_by_step(client)
    assert client.step == 5 and len(got) == 5
    for step in range(1, 5):
        assert got[step] == (attack + ["zero_grad"] + train_ if zero_first
                             else attack + train_ + ["zero_grad"]), step
    assert [m["micro"] for m in queued(client) if m["type"] == "phase"
            and m["name"] == "step" and m["edge"] == "begin"] == [4] * 5


def test_a_generators_output_is_no_attack_in_a_critics_watch(torch_mod):
    """A critic watched alone (WGAN): the generator's turn runs the critic
    on the generator's output (it requires a gradient, through the
    generator's parameters) and steps no critic update: a step that
    skipped its update, as without the input's gradient."""
    torch = torch_mod
    critic, opt_d, client, _ = build(torch)
    gen = torch.nn.Linear(2, 8)
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.01)
    for i in range(7):
        opt_d.zero_grad()
        opt_g.zero_grad()
        if i % 2:
            critic(gen(torch.randn(4, 2))).mean().backward()  # the generator's turn
            opt_g.step()
        else:
            critic(gen(torch.randn(4, 2)).detach()).mean().backward()
            opt_d.step()
    got = begins_by_step(client)
    assert client.step == 7 and len(got) == 7
    assert got[3] == ["zero_grad", "forward", "loss", "backward"]
    assert got[4] == ["zero_grad", "forward", "loss", "backward", "step"]


def test_eval_under_no_grad_inside_a_step_shows_as_forward_without_loss(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)
    opt.zero_grad()
    with torch.no_grad():
        model(torch.randn(2, 8))
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    got = spans(client)
    assert got[:4] == [("zero_grad", "begin", 0, 0), ("zero_grad", "end", 0, 0),
                       ("forward", "begin", 0, 0), ("forward", "end", 0, 0)]
    assert got[4:] == expected_step(0)[2:]


def test_remove_restores_everything_and_is_idempotent(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    # The instance's step is wrapped only where it has no step hooks (torch 1.13).
    assert ("step" in opt.__dict__) is (not watcher.uses_step_hooks)
    assert "zero_grad" in opt.__dict__
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
    """torch.optim.SGD with torch 2.x's step hooks (tests/stacks.py), so the
    hook path runs on torch 1.13 too; on torch 2.x SGD already has them."""
    if _patch.initialised(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)):
        return torch.optim.SGD
    return stacks.torch2_step_hooks(torch, torch.optim.SGD)


@pytest.mark.parametrize("force", [None, False], ids=["detected", "forced-off"])
def test_step_hook_path_and_its_fallback(torch_mod, force):
    torch = torch_mod
    model = mlp(torch)
    opt = make_hooked_sgd(torch)(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config, step_hooks=force)
    assert watcher.uses_step_hooks is (force is None)
    assert ("step" in opt.__dict__) is (force is False)
    assert len(opt._optimizer_step_pre_hooks) == (1 if force is None else 0)
    train(torch, model, opt, steps=2)
    assert spans(client) == expected_step(0) + expected_step(1)
    watcher.remove()
    assert not opt._optimizer_step_pre_hooks and not opt._optimizer_step_post_hooks
    assert "step" not in opt.__dict__


def test_without_queue_callback_backward_ends_at_the_next_phase(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch, queue_callback=None)
    train(torch, model, opt, steps=2, micro=2)
    assert spans(client) == expected_step(0, micro=2) + expected_step(1, micro=2)


def test_no_step_hooks_on_this_instance_means_step_is_wrapped(torch_mod):
    model, opt, client, watcher = build(torch_mod)
    has = _patch.initialised(opt) and hasattr(opt, "register_step_pre_hook")
    assert watcher.uses_step_hooks is has
    assert ("step" in opt.__dict__) is (not has)


def test_forward_that_raises_does_not_wedge_detection(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)
    with pytest.raises(RuntimeError):
        model(torch.randn(4, 7))  # wrong shape: raises inside forward
    train(torch, model, opt, steps=1)
    got = spans(client)
    # the failed forward is closed by the next phase as a failed step
    # (test_failed_steps.py), then a normal step follows
    assert got == [("forward", "begin", 0, 0), ("forward", "end", 0, 0)] + expected_step(1)
    assert [m.get("failed") for m in queued(client) if m["type"] == "phase"][1] == "error"


@pytest.mark.parametrize("hooks", [True, False], ids=["step-hooks", "wrapped-step"])
def test_user_exceptions_from_step_propagate_and_the_step_still_ends(torch_mod, hooks):
    torch = torch_mod
    base = stacks.torch2_step_hooks(torch, torch.optim.SGD) if hooks else torch.optim.SGD

    class Failing(base):
        fail = True

        def step(self, closure=None):
            if self.fail:
                raise KeyError("from the update")
            return super().step(closure)

    if hooks:
        Failing.step = stacks.torch2_step_hooks(torch, Failing).step
    model = mlp(torch)
    opt = Failing(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config, step_hooks=hooks)
    assert watcher.uses_step_hooks is hooks
    with pytest.raises(KeyError, match="from the update"):
        opt.step()
    # Both paths: the raised step is ended and counted, at once (wrapper) or
    # at the next phase (no post hook runs after a raise).
    model(torch.randn(4, 8))
    assert spans(client)[:3] == [("step", "begin", 0, 0), ("step", "end", 0, 0),
                                 ("forward", "begin", 1, 0)]


def test_closure_that_raises_propagates_and_opens_no_step_phase(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)

    def closure():
        raise KeyError("from the user")

    with pytest.raises(KeyError, match="from the user"):
        opt.step(closure)
    model(torch.randn(4, 8))
    assert spans(client)[:1] == [("forward", "begin", 1, 0)]


def test_inference_only_watch_still_shows_no_grad_forwards(torch_mod):
    torch = torch_mod
    model = mlp(torch)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, None, client.config)
    with torch.no_grad():
        model(torch.randn(2, 8))
    assert spans(client) == [("forward", "begin", 0, 0), ("forward", "end", 0, 0)]


def test_zero_grad_after_step_belongs_to_the_step_it_follows(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    for _ in range(3):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()  # the other common loop shape: zero after the update
    assert client.step == 3 and watcher.idle
    want = []
    for s in range(3):
        want += expected_step(s)[2:] + [("zero_grad", "begin", s, 0), ("zero_grad", "end", s, 0)]
    assert spans(client) == want, "no step 3 made of a lone zero_grad"


def test_one_line_loops_are_told_apart_by_where_each_call_stands(torch_mod):
    # zero_grad and step on one line: the order of the calls in the line
    # says which loop it is (a zero-first loop on one line was taken for
    # one that zeroes after the update, and left the fast paths).
    torch = torch_mod
    model, opt, client, watcher = build(torch)
    for _ in range(3): opt.zero_grad(); model(torch.randn(4, 8)).pow(2).mean().backward(); opt.step()  # noqa: E501,E701,E702
    assert client.step == 3 and watcher._zero_after is False
    want = []
    for s in range(3):
        want += expected_step(s)
    assert spans(client) == want
    model, opt, client, watcher = build(torch)
    for _ in range(3): model(torch.randn(4, 8)).pow(2).mean().backward(); opt.step(); opt.zero_grad()  # noqa: E501,E701,E702
    assert client.step == 3 and watcher.idle
    want = []
    for s in range(3):
        want += expected_step(s)[2:] + [("zero_grad", "begin", s, 0), ("zero_grad", "end", s, 0)]
    assert spans(client) == want


def test_zero_grad_first_loops_keep_zero_grad_at_the_head(torch_mod):
    torch = torch_mod
    model, opt, client, _ = build(torch)
    train(torch, model, opt, steps=3)
    opt.zero_grad()  # a trailing zero after a zero-first loop opens the next step
    assert spans(client)[-2:] == [("zero_grad", "begin", 3, 0), ("zero_grad", "end", 3, 0)]


def test_an_optimizer_subclass_calling_super_step_counts_one_step(torch_mod):
    """torch 2.x wraps step() per class (Optimizer._patch_step_function): a
    subclass whose step() calls super().step(), once the base class has an
    instance, runs the step hooks twice, nested. Found by the suite on torch
    2.15 (test_pins' Adam subclass showed 17 steps for 6). One step each."""
    torch = torch_mod

    class MyAdam(torch.optim.Adam):
        def step(self, closure=None):
            return super().step(closure)

    torch.optim.Adam(mlp(torch).parameters())  # Adam.step is now wrapped too (2.x)
    model, opt, client, _ = build(torch, MyAdam)
    train(torch, model, opt, steps=3)
    assert client.step == 3
    want = []
    for s in range(3):
        want += expected_step(s)
    assert spans(client) == want


@pytest.mark.parametrize("steps_before", [2, 4], ids=["at-step-2", "at-rest"])
def test_a_batch_whose_loss_is_skipped_is_a_step_that_skipped_its_update(torch_mod, steps_before):
    """A loop that zeroes first (known so from its second step: the
    zero_grad that began it) skips a batch whose loss is not finite (no
    backward, no optimizer.step()): that batch is a step of its own that
    skipped its update, the next zero_grad the next step's head, as a
    GradScaler's skipped step; not a second forward of the next step."""
    torch = torch_mod
    model, opt, client, _ = build(torch)
    for i in range(steps_before + 3):
        opt.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        if i == steps_before:
            continue  # "if not torch.isfinite(loss): continue"
        loss.backward()
        opt.step()
    got = spans(client)
    s = steps_before
    assert [p for p in got if p[2] == s] == [
        ("zero_grad", "begin", s, 0), ("zero_grad", "end", s, 0), ("forward", "begin", s, 0),
        ("forward", "end", s, 0), ("loss", "begin", s, 0), ("loss", "end", s, 0)]
    assert [p for p in got if p[2] == s + 1] == expected_step(s + 1)
    assert [p[2] for p in got if p[:2] == ("step", "end")] == [k for k in range(s + 3) if k != s]
