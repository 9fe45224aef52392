"""Lightning Fabric, in this process with an explicit ``watch()`` on what
``fabric.setup`` returned (a ``_FabricModule`` and a ``_FabricOptimizer``,
which subclasses the optimizer's class without running its ``__init__``),
against a real ``vramscope record`` (frameworks.check_loop): gradient
accumulation with ``no_backward_sync`` and ``fabric.backward``, in full and
in ``bf16-mixed`` precision."""

import pytest

import vramscope
from frameworks import check_loop, lightning
from loops import batches, mlp, param_hash

STEPS, ACCUMULATION = 3, 2


def fabric_loop(precision, watched="setup", zeroes="optimizer"):
    """Fabric's loop; ``watched``: what watch() is given ("setup": what
    fabric.setup returned; "raw": the module before it); ``zeroes``: whose
    zero_grad() the loop calls after the update ("optimizer", or "module":
    the _FabricModule's, torch's Module.zero_grad run on the wrapper)."""
    def loop(torch, sock=None):
        L = lightning()
        fabric = L.Fabric(accelerator="cpu", devices=1, precision=precision)
        torch.manual_seed(0)
        net = mlp(torch)
        raw_opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
        model, opt = fabric.setup(net, raw_opt)
        handle = None
        if sock:
            handle = vramscope.watch(*((model, opt) if watched == "setup" else (net, raw_opt)),
                                     socket=sock)
        done = 0
        for i, (x, y) in enumerate(batches(torch, STEPS * ACCUMULATION)):
            last = (i + 1) % ACCUMULATION == 0
            with fabric.no_backward_sync(model, enabled=not last):
                loss = torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATION
                fabric.backward(loss)
            if last:
                opt.step()
                (model if zeroes == "module" else opt).zero_grad()
                done += 1
        if handle is not None:
            handle.remove()
        return param_hash(net), done

    return loop


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_fabric(precision, torch_mod, vs_bin, workdir, recorders, capfd):
    check_loop(fabric_loop(precision), STEPS, ACCUMULATION, torch_mod, vs_bin, workdir,
               recorders, capfd)


@pytest.mark.parametrize("watched", ["setup", "raw"])
def test_fabric_zeroing_through_the_wrapped_module(watched, torch_mod, vs_bin, workdir, recorders,
                                                   capfd):
    """model.zero_grad() on what fabric.setup returned is torch's
    Module.zero_grad run on the _FabricModule, over the same parameters: it
    never calls the module's own zero_grad. Watched either way, each step
    still shows it (the wrappers that called the model get the patch,
    _patch.calling_wrappers), and the memory held between steps is read
    after it."""
    proc = check_loop(fabric_loop("32-true", watched, "module"), STEPS, ACCUMULATION, torch_mod,
                      vs_bin, workdir, recorders, capfd)
    for s in proc["steps"]:
        assert [p["phase"] for p in s["phases"]][-1] == "zero_grad", s["phases"]
