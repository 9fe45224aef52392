"""``backward`` begins when the user's backward starts."""

import pytest

from conftest import checkpoint, make_config, queued
import stacks
from vramscope import _backward, _client, _watch

VOCAB = 300


def lm(torch):
    return torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, VOCAB))


def edges(client):
    return [(m["name"], m["edge"]) for m in queued(client) if m["type"] == "phase"]


def entry_points(torch):
    acc = stacks.Accelerator(torch)
    return {
        "loss.backward()": lambda loss: loss.backward(),
        # GradScaler.scale(loss) returns loss * scale, a Tensor whose backward is Tensor.backward
        "scaler.scale(loss).backward()": lambda loss: (loss * 1024.0).backward(),
        "accelerator.backward(loss)": acc.backward,
        "torch.autograd.backward": lambda loss: torch.autograd.backward([loss]),
    }


@pytest.mark.parametrize("entry", ["loss.backward()", "scaler.scale(loss).backward()",
                                   "accelerator.backward(loss)", "torch.autograd.backward"])
def test_backward_begins_before_autograd_runs_the_loss_backward(torch_mod, entry):
    torch = torch_mod
    model = lm(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, opt, client.config)
    seen = []
    ids = torch.randint(0, VOCAB, (4, 12))
    opt.zero_grad()
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB), ids.view(-1))
    # The first autograd node of the backward is the loss's own: by then the
    # backward phase must be open (it used to open only at the model's output).
    loss.register_hook(lambda g: seen.append(edges(client)[-1]))
    entry_points(torch)[entry](loss)
    opt.step()
    assert seen == [("backward", "begin")]
    assert edges(client) == [
        ("zero_grad", "begin"), ("zero_grad", "end"), ("forward", "begin"), ("forward", "end"),
        ("loss", "begin"), ("loss", "end"), ("backward", "begin"), ("backward", "end"),
        ("step", "begin"), ("step", "end")]


def test_loss_ends_when_backward_is_called_not_when_autograd_reaches_the_output(torch_mod):
    torch = torch_mod
    model = lm(torch)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, None, client.config)
    ids = torch.randint(0, VOCAB, (4, 12))
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB), ids.view(-1))
    n = len(edges(client))
    loss.backward()
    assert edges(client)[n:] == [("loss", "end"), ("backward", "begin"), ("backward", "end")]


def test_the_global_wrapper_is_refcounted_and_undone_by_the_last_remove(torch_mod):
    torch = torch_mod
    original, tensor_backward = torch.autograd.backward, torch.Tensor.backward
    models = lm(torch), lm(torch)  # a watch ends with its model
    a = _watch.Watcher(torch, _client.Client(make_config(), start=False), models[0], None,
                       make_config())
    b = _watch.Watcher(torch, _client.Client(make_config(), start=False), models[1], None,
                       make_config())
    assert torch.autograd.backward is not original and _backward.installed()
    # Tensor.backward reaches the wrapper through torch.autograd.backward:
    # it is never wrapped itself.
    assert torch.Tensor.backward is tensor_backward
    a.remove()
    assert _backward.installed()
    b.remove()
    assert torch.autograd.backward is original and not _backward.installed()
    assert torch.autograd.backward.__name__ == "backward"
    assert not getattr(torch.autograd.backward, "_vramscope_wrapper", False)


def step_edges(torch, model, opt, client):
    """One plain step's phases, as the client queued them."""
    n = len(edges(client))
    ids = torch.randint(0, VOCAB, (4, 12))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(ids).view(-1, VOCAB), ids.view(-1)).backward()
    opt.step()
    return [name for name, e in edges(client)[n:] if e == "begin"]


def test_one_watch_is_torch_s_backward_itself_and_several_share_the_wrapper(torch_mod):
    # With one watch, torch.autograd.backward is that watch's entry (no
    # frame of the wrapper's a backward); a second puts the wrapper back,
    # and the one left after a remove() is called directly again.
    torch = torch_mod
    original = torch.autograd.backward
    models = lm(torch), lm(torch)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    clients = [_client.Client(make_config(), start=False) for _ in models]
    a = _watch.Watcher(torch, clients[0], models[0], opts[0], clients[0].config)
    entry = torch.autograd.backward
    assert entry.func.__self__ is a and entry.__name__ == "backward"
    assert entry.__wrapped__ is original and entry._vramscope_wrapper
    b = _watch.Watcher(torch, clients[1], models[1], opts[1], clients[1].config)
    wrapper = torch.autograd.backward
    assert not hasattr(wrapper, "func") and wrapper.__wrapped__ is original
    for _ in range(2):
        for m, o, c in zip(models, opts, clients):
            assert step_edges(torch, m, o, c) == ["zero_grad", "forward", "loss", "backward",
                                                  "step"]
    a.remove()
    assert torch.autograd.backward.func.__self__ is b
    assert step_edges(torch, models[1], opts[1], clients[1]) == [
        "zero_grad", "forward", "loss", "backward", "step"]
    b.remove()
    assert torch.autograd.backward is original


def test_a_wrapper_on_top_of_a_watch_s_entry_keeps_working_for_the_next_watch(torch_mod):
    # Someone wraps torch.autograd.backward while one watch's entry is
    # there, and a second watch comes: the entry stays under their wrapper
    # and passes the second's backwards to the wrapper's general path,
    # which gives them to the second watch; so after the first watch goes,
    # and with none left, backward still runs, once each call.
    torch = torch_mod
    original = torch.autograd.backward
    calls = []
    models = lm(torch), lm(torch)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    clients = [_client.Client(make_config(), start=False) for _ in models]
    a = _watch.Watcher(torch, clients[0], models[0], opts[0], clients[0].config)
    ours = torch.autograd.backward

    def theirs(*args, **kwargs):
        calls.append(1)
        return ours(*args, **kwargs)

    torch.autograd.backward = theirs
    plain = ["zero_grad", "forward", "loss", "backward", "step"]
    try:
        b = _watch.Watcher(torch, clients[1], models[1], opts[1], clients[1].config)
        assert torch.autograd.backward is theirs
        for _ in range(2):
            for m, o, c in zip(models, opts, clients):
                assert step_edges(torch, m, o, c) == plain
        a.remove()
        assert step_edges(torch, models[1], opts[1], clients[1]) == plain
        b.remove()
        assert step_edges(torch, models[1], opts[1], clients[1]) == []
        assert len(calls) == 6
    finally:
        torch.autograd.backward = original
        _backward._reset_for_tests()


def test_a_backward_of_another_model_is_not_this_ones(torch_mod):
    torch = torch_mod
    watched, other = lm(torch), lm(torch)
    client = _client.Client(make_config(), start=False)
    w = _watch.Watcher(torch, client, watched, None, client.config)
    ids = torch.randint(0, VOCAB, (2, 5))
    other(ids).sum().backward()
    assert edges(client) == []
    w.remove()


def test_checkpoint_recomputation_and_a_raising_backward_leave_nothing_open(torch_mod):
    torch = torch_mod

    class Ckpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.b = torch.nn.Linear(8, 8)

        def forward(self, x):
            return checkpoint(torch, self.b, self.a(x).relu())

    model = Ckpt()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8, requires_grad=True)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    assert [n for n, e in edges(client) if e == "begin"] == [
        "zero_grad", "forward", "loss", "backward", "step"]
    out = model(x).sum()

    def fail(grad):
        raise ValueError("from a user's grad hook")

    out.register_hook(fail)
    with pytest.raises(ValueError, match="grad hook"):
        out.backward()
    assert edges(client)[-2:] == [("backward", "begin"), ("backward", "end")]
    assert w._open is None and not w._in_backward
    opt.zero_grad()
    model(x).sum().backward()
    assert edges(client)[-2:] == [("backward", "begin"), ("backward", "end")]


def test_torch_autograd_grad_still_gives_a_backward_through_the_output_hook(torch_mod):
    torch = torch_mod
    model = lm(torch)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, None, client.config)
    out = model(torch.randint(0, VOCAB, (2, 5))).sum()
    torch.autograd.grad(out, list(model.parameters()))
    assert ("backward", "begin") in edges(client)


def test_a_gradient_penalty_is_no_backward_of_the_model_from_step_0_on(torch_mod):
    """WGAN-GP's critic step: the gradient of the critic's output with
    respect to its input (torch.autograd.grad, create_graph=True), then the
    loss's backward. The penalty's gradient takes none of the critic's
    parameters: each step, step 0 too (when the output's grad hook is the
    fallback still), has the loss's backward alone, the penalty in its
    loss."""
    torch = torch_mod
    critic = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(critic.parameters(), lr=1e-4)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, critic, opt, client.config)
    for _ in range(3):
        real, fake = torch.randn(8, 8), torch.randn(8, 8)
        opt.zero_grad()
        mixed = (0.5 * real + 0.5 * fake).requires_grad_(True)
        out = critic(mixed)
        grad, = torch.autograd.grad(out, mixed, torch.ones_like(out), create_graph=True)
        penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
        (critic(fake).mean() - critic(real).mean() + 10 * penalty).backward()
        opt.step()
    watcher.remove()
    begins = {}
    for m in queued(client):
        if m["type"] == "phase" and m["edge"] == "begin":
            begins.setdefault(m["step"], []).append(m["name"])
    assert sorted(begins) == [0, 1, 2]
    for step, names in begins.items():
        assert names.count("backward") == 1 and names[-2:] == ["backward", "step"], (step, names)


def test_outputs_are_hooked_only_until_backwards_come_through_the_wrapper(torch_mod):
    # The output's grad hook is the fallback for backwards that bypass the
    # wrapper; a loop that calls loss.backward() stops paying for it,
    # and a step whose forward no wrapped backward followed turns it back on.
    torch = torch_mod
    model = lm(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, opt, client.config)
    ids = torch.randint(0, VOCAB, (2, 5))
    hooked = []

    def step(backward):
        opt.zero_grad()
        out = model(ids)
        hooked.append(bool(out._backward_hooks))
        loss = out.sum()
        if backward:
            loss.backward()
        else:
            grads = torch.autograd.grad(loss, list(model.parameters()))
            for p, g in zip(model.parameters(), grads):
                p.grad = g
        opt.step()
        return [(m["name"], m["edge"]) for m in queued(client)
                if m["type"] == "phase" and m["step"] == client.step - 1]

    assert ("backward", "begin") in step(True)
    assert ("backward", "begin") in step(True)
    # The first step that switches to autograd.grad shows no backward: its
    # output was not hooked. It turns the hook back on for the next steps.
    assert ("backward", "begin") not in step(False)
    assert ("backward", "begin") in step(False)
    assert ("backward", "begin") in step(True)
    assert hooked == [True, False, False, True, True]
