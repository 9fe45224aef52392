"""The paths the hook picks by feature on the installed torch:
make test-py runs this file on Debian's torch 1.13 and on the venv's 2.15,
so each branch runs for real on the torch that has it. Each case trains a
watched model and an unwatched twin: bit-identical weights, one step per
update, the five phases."""

import pytest

from conftest import make_config
from vramscope import _anatomy, _client, _patch, _watch

FIVE = ["zero_grad", "forward", "loss", "backward", "step"]


def optimizers(torch):
    """(name, factory) for each optimizer flag this torch takes."""
    import inspect
    out = [("sgd", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9))]
    params = inspect.signature(torch.optim.AdamW).parameters
    if "foreach" in params:
        out.append(("adamw-foreach", lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True)))
        out.append(("adamw-loop", lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=False)))
    if "fused" in params:
        out.append(("adamw-fused", lambda ps: torch.optim.AdamW(ps, lr=1e-3, fused=True)))
    return out


def run(torch, make_opt, set_to_none, watched):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = make_opt(model.parameters())
    client = watcher = None
    if watched:
        client = _client.Client(make_config(), start=False)
        watcher = _watch.Watcher(torch, client, model, opt, client.config)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        opt.zero_grad(set_to_none=set_to_none)
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    weights = [p.detach().clone() for p in model.parameters()]
    return weights, client, watcher, opt


@pytest.mark.parametrize("set_to_none", [True, False])
def test_every_optimizer_flag_counts_one_step_per_update(set_to_none, torch_mod):
    torch = torch_mod
    made = optimizers(torch)
    assert made, "no optimizer"
    for name, make_opt in made:
        try:
            want, _, _, _ = run(torch, make_opt, set_to_none, watched=False)
        except RuntimeError as exc:  # fused on a CPU that this torch cannot fuse on
            if "fused" in name:
                continue
            raise
        got, client, watcher, opt = run(torch, make_opt, set_to_none, watched=True)
        assert all(torch.equal(a, b) for a, b in zip(want, got)), name
        assert client.step == 3, name
        # Step hooks where the instance takes them (torch >= 2.0), else the patch.
        assert watcher.uses_step_hooks == _patch.has_step_hooks(opt), name
        assert watcher.uses_step_hooks == hasattr(opt, "_optimizer_step_pre_hooks"), name
        from test_phases import spans
        begins = [(n, s) for n, e, s, _ in spans(client) if e == "begin"]
        assert begins == [(n, s) for s in range(3) for n in FIVE], name


def test_storage_identity_uses_untyped_storage_where_it_exists(torch_mod):
    torch = torch_mod
    t = torch.zeros(4, 8)
    view = t[1:]
    assert _anatomy.storage_of(t) == _anatomy.storage_of(view), "a view shares its storage"
    assert _anatomy.storage_of(t)[0] != _anatomy.storage_of(torch.zeros(4, 8))[0]
    assert _anatomy.storage_of(t)[1] == 4 * 8 * 4
    get = _anatomy._getter_of(torch.Tensor)
    if hasattr(torch.Tensor, "untyped_storage"):  # torch >= 2.0 takes this path
        assert get is torch.Tensor.untyped_storage
        assert _anatomy.storage_of(t) == (("cpu", t.untyped_storage().data_ptr()), 128)
