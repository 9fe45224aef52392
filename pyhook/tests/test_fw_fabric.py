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


def fabric_loop(precision):
    def loop(torch, sock=None):
        L = lightning()
        fabric = L.Fabric(accelerator="cpu", devices=1, precision=precision)
        torch.manual_seed(0)
        net = mlp(torch)
        model, opt = fabric.setup(net, torch.optim.AdamW(net.parameters(), lr=1e-2))
        handle = vramscope.watch(model, opt, socket=sock) if sock else None
        done = 0
        for i, (x, y) in enumerate(batches(torch, STEPS * ACCUMULATION)):
            last = (i + 1) % ACCUMULATION == 0
            with fabric.no_backward_sync(model, enabled=not last):
                loss = torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATION
                fabric.backward(loss)
            if last:
                opt.step()
                opt.zero_grad()
                done += 1
        if handle is not None:
            handle.remove()
        return param_hash(net), done

    return loop


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_fabric(precision, torch_mod, vs_bin, workdir, recorders, capfd):
    check_loop(fabric_loop(precision), STEPS, ACCUMULATION, torch_mod, vs_bin, workdir,
               recorders, capfd)
