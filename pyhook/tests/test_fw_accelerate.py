"""Real accelerate, in this process with an explicit ``watch()``, against a
real ``vramscope record``: a plain loop with ``gradient_accumulation_steps``
(``accelerator.backward``, ``accumulate``). It also runs without the hook:
bit-identical weights (frameworks.check_loop)."""

import pytest

import vramscope
from frameworks import check_loop, need
from loops import batches, mlp, param_hash

STEPS, ACCUMULATION = 3, 2


def accelerate_loop(torch, sock=None):
    accelerate = need("accelerate")
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION)
    torch.manual_seed(0)
    net = mlp(torch)
    model, opt = acc.prepare(net, torch.optim.AdamW(net.parameters(), lr=1e-3))
    handle = vramscope.watch(model, opt, socket=sock) if sock else None
    done = 0
    for x, y in batches(torch, STEPS * ACCUMULATION):
        with acc.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            acc.backward(loss)
            done += acc.sync_gradients
            opt.step()
            opt.zero_grad()
    if handle is not None:
        handle.remove()
    return param_hash(net), done


LOOPS = {"accelerate": (accelerate_loop, ACCUMULATION)}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loop_with_watch(name, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    fn, micro = LOOPS[name]
    check_loop(fn, STEPS, micro, torch_mod, vs_bin, workdir, recorders, capfd)
