"""Which measured steps take the split by module (docs/anatomy.md, "When
the split is taken"), and that the others measure the same total without it."""

import pytest

from conftest import make_config, queued
from vramscope import _client, _schedule, _watch

F32 = 4


def mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def train(torch, model, batches, **cfg):
    """One step per input batch size in ``batches``, every step measured;
    returns the anatomy messages and, per step, how many global module
    forward pre-hooks were in force during the forward."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(activations_every=1, **cfg), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    hooks = []
    table = torch.nn.modules.module._global_forward_pre_hooks
    probe = model[0].register_forward_hook(lambda *a: hooks.append(len(table)))
    for b in batches:
        opt.zero_grad()
        model(torch.randn(b, 8)).pow(2).mean().backward()
        opt.step()
    probe.remove()
    watcher.remove()
    return [m for m in queued(client) if m["type"] == "anatomy"], hooks


def split_steps(msgs):
    return [m["step"] for m in msgs if m["saved"] is not None]


def test_the_split_is_taken_on_the_first_steps_then_once_in_ten(torch_mod):
    torch = torch_mod
    msgs, hooks = train(torch, mlp(torch), [4] * 25)
    assert [m["step"] for m in msgs] == list(range(25))
    every = _schedule.SPLIT_EVERY
    assert split_steps(msgs) == [0, 1, 2, 2 + every, 2 + 2 * every]
    # every step measured the same total: the input and the ReLU's output
    assert {m["activations"] for m in msgs} == {(4 * 8 + 4 * 16) * F32}
    assert all(m["activations_source"] == "measured" for m in msgs)
    # the module hooks are in force on the split steps only
    assert [s for s, n in enumerate(hooks) if n] == split_steps(msgs)
    # the split holds the total (the loss measured once past step 0)
    for m in msgs:
        if m["saved"] is not None:
            s = m["saved"]
            assert sum(e["bytes"] for e in s["modules"]) + s["rest"]["bytes"] == m["activations"]
            assert (s["loss"] is None) == (m["step"] == 0)


def train_step_layout(torch, layout):
    """25 measured steps of a model trained through a training_step
    (Lightning's) that calls its submodules (the README's layout), then a
    loss module (``"loss_module"``), or uses their weights directly
    (``"functional"``); returns the anatomy messages."""

    class PowLoss(torch.nn.modules.loss._Loss):
        def forward(self, out):
            return out.pow(2).mean()

    class Lit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = mlp(torch)
            self.criterion = PowLoss()

        def training_step(self, x):
            if layout == "functional":
                lin0, lin1 = self.body[0], self.body[2]
                h = torch.relu(torch.nn.functional.linear(x, lin0.weight, lin0.bias))
                return torch.nn.functional.linear(h, lin1.weight, lin1.bias).pow(2).mean()
            if layout == "loss_module":
                return self.criterion(self.body(x))
            return self.body(x).pow(2).mean()

    model = Lit()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(activations_every=1), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(25):
        opt.zero_grad()
        model.training_step(torch.randn(4, 8)).backward()
        opt.step()
    watcher.remove()
    msgs = [m for m in queued(client) if m["type"] == "anatomy"]
    assert [m["step"] for m in msgs] == list(range(25))
    return msgs


@pytest.mark.parametrize("layout", ["submodules", "loss_module"])
def test_a_training_step_that_calls_submodules_measures_its_loss_apart(torch_mod, layout):
    # What training_step saves after its last submodule ended, or from its
    # loss module's call (pow's input), is the loss's, as what a loop saves
    # after the model's forward is: in saved.loss and not in activations,
    # on steps with the split or without.
    torch = torch_mod
    msgs = train_step_layout(torch, layout)
    assert {m["activations"] for m in msgs} == {(4 * 8 + 4 * 16) * F32}
    every = _schedule.SPLIT_EVERY
    assert split_steps(msgs) == [0, 1, 2, 2 + every, 2 + 2 * every]
    for m in msgs:
        if m["saved"] is not None:
            assert m["saved"]["loss"] == {"bytes": 4 * 4 * F32, "largest": 4 * 4 * F32,
                                          "tensors": 1}, m["saved"]


def test_a_layout_that_never_measures_the_loss_splits_as_often_as_one_that_does(torch_mod):
    # A training_step that calls no module keeps its loss in forward: no
    # split measures it apart. Two splits in a row without it say so, and
    # the split is taken as for any other layout (before, every measured
    # step took it).
    torch = torch_mod
    msgs = train_step_layout(torch, "functional")
    every = _schedule.SPLIT_EVERY
    assert split_steps(msgs) == [0, 1, 2, 2 + every, 2 + 2 * every]
    assert all(m["saved"]["loss"] is None for m in msgs if m["saved"] is not None)
    # the same total every step, the loss's saved tensor in it
    assert {m["activations"] for m in msgs} == {(4 * 8 + 4 * 16 + 4 * 4) * F32}


def test_a_new_input_size_takes_the_split(torch_mod):
    torch = torch_mod
    msgs, _ = train(torch, mlp(torch), [4, 4, 4, 4, 4, 6, 6, 4, 4])
    assert split_steps(msgs) == [0, 1, 2, 5, 7]
    assert [m["activations"] for m in msgs] == [(b * 8 + b * 16) * F32
                                                for b in [4, 4, 4, 4, 4, 6, 6, 4, 4]]


class Growing:
    """A model whose forward saves one more tensor from a given step on,
    at the same input size."""

    def __new__(cls, torch, grow_at):
        class Model(torch.nn.Sequential):
            calls = 0

            def forward(self, x):
                y = super().forward(x)
                Model.calls += 1
                return y.exp() if Model.calls > grow_at else y
        return Model(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_a_total_that_moved_takes_the_split_at_the_next_measured_step(torch_mod):
    torch = torch_mod
    msgs, _ = train(torch, Growing(torch, 5), [4] * 9)
    base = (4 * 8 + 4 * 16) * F32
    assert [m["activations"] for m in msgs] == [base] * 5 + [base + 4 * 4 * F32] * 4
    # step 5 moved without the split; step 6 takes it, labelled with its own total
    assert split_steps(msgs) == [0, 1, 2, 6]


def test_a_graph_the_forward_drops_is_not_counted_split_or_not(torch_mod):
    torch = torch_mod

    class Model(torch.nn.Sequential):
        def forward(self, x):
            (x * 2).exp().sum()  # saved by exp, then dropped with its graph
            return super().forward(x)

    msgs, _ = train(torch, Model(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                 torch.nn.Linear(16, 4)), [4] * 5)
    assert split_steps(msgs) == [0, 1, 2]
    assert {m["activations"] for m in msgs} == {(4 * 8 + 4 * 16) * F32}


def test_two_forwards_before_one_backward_add_up_split_or_not(torch_mod):
    torch = torch_mod
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(activations_every=1), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8)
    for _ in range(6):
        opt.zero_grad()
        (model(x) + model(x)).pow(2).mean().backward()  # the input saved twice: once
        opt.step()
    watcher.remove()
    msgs = [m for m in queued(client) if m["type"] == "anatomy"]
    assert split_steps(msgs) == [0, 1, 2]
    assert {m["activations"] for m in msgs} == {(4 * 8 + 2 * 4 * 16) * F32}
