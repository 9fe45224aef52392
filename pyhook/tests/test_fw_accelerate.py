"""Real accelerate and torch.compile, in this process with an
explicit ``watch()``, against a real ``vramscope record``: a plain accelerate
loop (``accelerator.backward``, ``accumulate``) and a ``torch.compile``d model
(the ``aot_eager`` backend: compiled forward and backward graphs, no C++
toolchain). Each also runs without the hook: bit-identical weights."""

import warnings

import pytest

import vramscope
from frameworks import PHASES, Recording, need, need_attr, phase_counts, phase_order
from loops import param_hash

STEPS, ACCUMULATION = 3, 2


def accelerate_loop(torch, sock=None):
    accelerate = need("accelerate")
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model, opt = acc.prepare(net, torch.optim.AdamW(net.parameters(), lr=1e-3))
    handle = vramscope.watch(model, opt, socket=sock) if sock else None
    g = torch.Generator().manual_seed(1)
    done = 0
    for _ in range(STEPS * ACCUMULATION):
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        with acc.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            acc.backward(loss)
            done += acc.sync_gradients
            opt.step()
            opt.zero_grad()
    if handle is not None:
        handle.remove()
    return param_hash(net), done


def compiled_loop(torch, sock=None):
    need_attr(torch, "compile", "torch.compile")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = torch.compile(net, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    handle = vramscope.watch(model, opt, socket=sock) if sock else None
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    if handle is not None:
        handle.remove()
    return param_hash(net), STEPS


LOOPS = {"accelerate": (accelerate_loop, ACCUMULATION), "compile": (compiled_loop, 1)}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loop_with_watch(name, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    fn, micro = LOOPS[name]
    want = fn(torch_mod)
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(torch_mod, sock=rec.sock)
    out = capfd.readouterr()
    assert got == want, "the hook changed the weights"
    assert want[1] == STEPS
    assert not [w for w in caught if "vramscope" in str(w.message)], [str(w.message) for w in caught]
    assert "vramscope:" not in out.out + out.err, out
    proc = rec.process()
    assert proc["steps_total"] == STEPS, [phase_order(s) for s in proc["steps"]]
    for s in proc["steps"]:
        counts = phase_counts(s)
        assert sorted(counts) == sorted(PHASES), (s["step"], phase_order(s))
        assert counts["forward"] == counts["backward"] == micro, counts
        assert counts["step"] == counts["zero_grad"] == 1, counts
