"""A plain loop that trains the watched model without calling it: its
children are called instead (``model[0](x)``, ``model.encoder(x)`` then
``model.decoder(z)``, a method of the model's that calls them). The model's
forward hooks never fire and the backward is no watch's; from the step
after the first such one the children are hooked and the steps have the
phases of a loop that calls the model (docs/hook.md, "Loop shapes").
Compared with the same training written with ``model(x)``, on the
simulated allocator (bench/fakecuda.py), through the hook's own queue.
"""

import contextlib
import os
import sys
import time
import warnings

import pytest

from conftest import make_config
from vramscope import _client, _cuda, _messages, _watch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
import fakecuda  # noqa: E402


def messages(client):
    """The phase and the anatomy messages queued."""
    phase, anatomy = [], []
    for _, msg in client._number(len(client._queue), 0):
        for m in _messages.phase_messages(msg) if type(msg) is tuple else [dict(msg)]:
            if m.get("type") == "phase":
                phase.append(m)
            elif m.get("type") == "anatomy":
                anatomy.append(m)
    return phase, anatomy


def shape(msgs):
    return [(m["step"], m["name"], m["edge"], m["micro"]) for m in msgs]


def begins(msgs, step):
    """(phase, micro) of each phase that began in ``step``."""
    return [(m["name"], m["micro"]) for m in msgs if m["step"] == step and m["edge"] == "begin"]


def after_step_0(msgs):
    return shape([m for m in msgs if m["step"] >= 1])


def watched(torch, layout, steps, every=100, micro=1, evaluate=False, loss_wait=0.0):
    """Train a GELU MLP for ``steps`` steps under a watch, calling it by
    ``layout`` ("model": model(x); "children": each child in turn; "method":
    a method of the model's that calls them); returns the phase messages,
    the anatomy messages and the watch."""
    sim = fakecuda.SimAllocator().install(torch)
    try:
        client = _client.Client(make_config(activations_every=every), cuda=_cuda.CudaStats(torch, 0),
                                start=False)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
        model.encode = lambda x: model[1](model[0](x))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        xs = [torch.randn(5, 8) for _ in range(steps * micro)]
        for i in range(steps):
            opt.zero_grad()
            for k in range(micro):
                x = xs[i * micro + k]
                if layout == "model":
                    out = model(x)
                elif layout == "children":
                    out = model[2](model[1](model[0](x)))
                else:
                    out = model[2](model.encode(x))
                time.sleep(loss_wait)
                loss = out.pow(2).mean() / micro
                loss.backward()
            opt.step()
            if evaluate:
                with torch.no_grad():
                    if layout == "model":
                        model(xs[0])
                    else:
                        model[2](model[1](model[0](xs[0])))
        msgs, anatomy = messages(client)
        weights = [p.detach().clone() for p in model.parameters()]
        w.remove()
        client.close("removed", timeout=0)
    finally:
        sim.uninstall()
    return msgs, anatomy, w, weights


def test_a_loop_calling_the_children_has_the_phases_of_one_calling_the_model(torch_mod):
    model, _, wm, weights = watched(torch_mod, "model", 5)
    for layout in ("children", "method"):
        kids, _, wk, kid_weights = watched(torch_mod, layout, 5)
        assert all((a == b).all() for a, b in zip(weights, kid_weights)), "the same training"
        # Step 0: the forward went unseen; the backward no watch claimed is
        # the step's, and the children are hooked when it begins.
        assert begins(kids, 0) == [("zero_grad", 0), ("backward", 0), ("step", 1)], layout
        assert after_step_0(kids) == after_step_0(model), layout
        assert wk._child_layout and not wm._child_layout and wm._sub_hooks == ()


def test_forward_ends_where_the_last_child_ended(torch_mod):
    kids, _, _, _ = watched(torch_mod, "children", 3, loss_wait=0.05)
    t = {(m["step"], m["name"], m["edge"]): m["t"] for m in kids}
    for s in (1, 2):
        assert t[(s, "forward", "end")] == t[(s, "loss", "begin")]
        assert t[(s, "loss", "end")] - t[(s, "loss", "begin")] >= 0.05, "the loss is not the model's"
        assert t[(s, "forward", "end")] - t[(s, "forward", "begin")] < 0.05


def test_accumulation_through_the_children_counts_its_micro_steps(torch_mod):
    model, _, _, _ = watched(torch_mod, "model", 4, micro=3)
    kids, _, _, _ = watched(torch_mod, "children", 4, micro=3)
    assert after_step_0(kids) == after_step_0(model)
    assert [m["micro"] for m in kids if m["name"] == "backward" and m["edge"] == "begin"
            and m["step"] == 2] == [0, 1, 2]
    # Step 0's first micro-step's forward went unseen; the others are seen,
    # the children hooked at its first backward.
    assert begins(kids, 0) == [("zero_grad", 0), ("backward", 0), ("forward", 1), ("loss", 1),
                               ("backward", 1), ("forward", 2), ("loss", 2), ("backward", 2),
                               ("step", 3)]


def test_the_children_under_no_grad_between_steps_are_an_evaluation(torch_mod):
    model, _, _, _ = watched(torch_mod, "model", 4, evaluate=True)
    kids, _, _, _ = watched(torch_mod, "children", 4, evaluate=True)
    assert after_step_0(kids) == after_step_0(model)
    assert ("eval", "begin") in [(m["name"], m["edge"]) for m in kids if m["step"] == 2]


def test_measured_activations_are_the_childrens_saved_tensors_alone(torch_mod):
    _, model, _, _ = watched(torch_mod, "model", 4, every=1)
    _, kids, _, _ = watched(torch_mod, "children", 4, every=1)
    by_step = {m["step"]: m["activations"] for m in model}
    got = {m["step"]: m["activations"] for m in kids}
    assert got[2] == by_step[2] and got[3] == by_step[3] and by_step[2] > 0


def children_loop(torch, watch=None, steps=5):
    """zero_first's training, the model's children called in turn."""
    import loops
    torch.manual_seed(0)
    model = loops.mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for _ in range(steps):
        opt.zero_grad()
        out = x
        for child in model.children():
            out = child(out)
        torch.nn.functional.cross_entropy(out, y).backward()
        opt.step()
    return handle, steps, loops.param_hash(model)


def test_the_recorded_report_of_a_loop_calling_the_children(torch_mod, vs_bin, workdir,
                                                            recorders):  # noqa: F811
    from test_loop_shapes import TRAIN, recorded_in_process, shape as table
    _, want_steps, want_hash = children_loop(torch_mod)
    done, digest, proc = recorded_in_process(torch_mod, vs_bin, workdir, recorders, children_loop)
    assert (done, digest) == (want_steps, want_hash), "the hook changed the result"
    rows = table(proc)
    assert rows[0] == [("zero_grad", 1), ("backward", 1), ("step", 1)]
    assert rows[1:] == [[(n, 1) for n in ["zero_grad"] + TRAIN]] * (want_steps - 1)


@contextlib.contextmanager
def three_children(torch):
    """A Watcher of a three-child model and its optimizer on an unstarted
    client over the simulated allocator: (client, model, optimizer,
    watcher); removed, closed and uninstalled at the end."""
    sim = fakecuda.SimAllocator().install(torch)
    try:
        client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch, 0), start=False)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        try:
            yield client, model, opt, w
        finally:
            w.remove()
            client.close("removed", timeout=0)
    finally:
        sim.uninstall()


def test_a_child_that_raised_leaves_the_next_steps_their_phases(torch_mod):
    torch = torch_mod
    with three_children(torch) as (client, model, opt, w):
        for i in range(5):
            opt.zero_grad()
            h = model[0](torch.randn(5, 8))
            if i == 2:
                try:
                    model[2](h)  # the wrong shape: the child raises, its end never comes
                except RuntimeError:
                    pass
            model[2](model[1](h)).pow(2).mean().backward()
            opt.step()
        msgs, _ = messages(client)
    assert [m["name"] for m in msgs if m["step"] == 4 and m["edge"] == "begin"] == \
        ["zero_grad", "forward", "loss", "backward", "step"]


def test_a_child_compiled_in_place_is_not_hooked(torch_mod):
    torch = torch_mod
    if not hasattr(torch.nn.Module, "compile"):
        pytest.skip("this torch has no Module.compile()")
    # A CPU run (no simulated CUDA: dynamo would look for the device it claims)
    client = _client.Client(make_config(), cuda=None, start=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    model[1].compile(backend="eager", fullgraph=True)  # hooks traced there would raise
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(4):
        opt.zero_grad()
        model[2](model[1](model[0](torch.randn(5, 8)))).pow(2).mean().backward()
        opt.step()
    msgs, _ = messages(client)
    hooked = [len(m._forward_pre_hooks) for m in model]
    w.remove()
    client.close("removed", timeout=0)
    assert hooked == [1, 0, 1]
    assert [m["name"] for m in msgs if m["step"] == 3 and m["edge"] == "begin"] == \
        ["zero_grad", "forward", "loss", "backward", "step"]


def test_a_trace_of_a_model_trained_through_its_children_runs_none_of_the_hook(torch_mod):
    """torch.jit.trace of a model whose children are hooked (docs/hook.md,
    "Copies of a watched model"): the children's hooks stay out of the
    trace, whose sanity check (two traces of the same call) they broke by
    naming its values, and no training phase is queued; the check's own
    call under no_grad between steps is an evaluation, as any."""
    torch = torch_mod
    with three_children(torch) as (client, model, opt, w):
        for _ in range(4):
            opt.zero_grad()
            model[2](model[1](model[0](torch.randn(5, 8)))).pow(2).mean().backward()
            opt.step()
        assert w._child_layout
        before, _ = messages(client)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", message=".*is deprecated", category=FutureWarning)
            torch.jit.trace(model, torch.randn(5, 8))
        after, _ = messages(client)
        assert {m["name"] for m in after[len(before):]} <= {"eval"}

