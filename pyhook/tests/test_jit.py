"""TorchScript of a watched model (vramscope._jit): torch.jit.script
compiles it without the watch's hooks, which it cannot compile, and puts
them back as they were; the watch goes on."""

import pytest

from conftest import make_config, queued
from vramscope import _client, _jit, _watch


def watched(torch):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    return model, opt, client, _watch.Watcher(torch, client, model, opt, client.config)


def step(torch, model, opt):
    opt.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    opt.step()


def hooks_of(model):
    return (list(model._forward_pre_hooks.items()), list(model._forward_hooks.items()),
            model.__dict__.get("forward"))


@pytest.mark.parametrize("trained_first", [True, False])
def test_a_watched_model_scripts_as_it_would_unwatched(torch_mod, trained_first):
    """Before any forward, torch 1.13's keyword-input wrapper of the model's
    forward is in place too; it is left out of the compiled copy as well."""
    torch = torch_mod
    model, opt, client, watcher = watched(torch)
    if trained_first:
        step(torch, model, opt)
    before = hooks_of(model)
    scripted = torch.jit.script(model)  # raised UnsupportedNodeError ("try blocks")
    assert hooks_of(model) == before
    x = torch.randn(3, 8)
    with torch.no_grad():
        assert torch.equal(scripted(x), model(x))
    assert not scripted._forward_hooks and not scripted._forward_pre_hooks
    for _ in range(2):
        step(torch, model, opt)
    assert client.step == (3 if trained_first else 2)  # the watch goes on
    assert [m["name"] for m in queued(client) if m["type"] == "phase" and m["edge"] == "begin"
            and m["step"] == client.step - 1][-4:] == ["forward", "loss", "backward", "step"]
    watcher.remove()
    assert not hasattr(torch.jit._recursive.create_script_module, "__wrapped__")


def test_a_script_that_fails_puts_the_hooks_back_in_their_order(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = watched(torch)
    model.register_forward_hook(lambda m, args, out: None)  # the user's, after the watch's
    before = hooks_of(model)
    with pytest.raises(Exception) as info:
        torch.jit.script(model)  # the user's lambda is no TorchScript
    assert "vramscope" not in str(info.value)
    assert hooks_of(model) == before
    watcher.remove()


def test_a_model_not_watched_compiles_untouched(torch_mod):
    torch = torch_mod
    model, opt, client, watcher = watched(torch)
    other = torch.nn.Linear(8, 2)
    assert torch.jit.script(other)(torch.randn(1, 8)).shape == (1, 2)
    assert torch.jit.trace(other, torch.randn(1, 8))(torch.randn(1, 8)).shape == (1, 2)
    watcher.remove()
    assert _jit._state["recursive"] is None
