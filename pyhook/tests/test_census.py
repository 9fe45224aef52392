"""The census names who holds what grows (docs/census.md): real CPU training
loops that leak each way users write it, and two controls that do not.

The fake monitor asks on suspicion, as the real one does, by writing a
census request to the hook's connection; the hook answers at the next step
boundary and once more FOLLOW_UP_STEPS steps later. What grew between the
two answers must be the leak's holder, on the leak's line; in the controls
nothing may grow."""

import gc
import inspect
import json
import os
import time

import pytest

import leaky
from conftest import make_config
from vramscope import _census_trigger, _client, _watch

STEPS = 14
ASK_AT = 4  # the step after which the monitor asks


def _line_of(tag):
    src = inspect.getsource(leaky).splitlines()
    hits = [i + 1 for i, line in enumerate(src) if line.rstrip().endswith("# leak: " + tag)]
    assert len(hits) == 1, tag
    return hits[0]


@pytest.fixture(autouse=True)
def _budget(monkeypatch):
    """A census that stops at its budget says so (``complete`` false), and
    these tests need every figure: on a loaded 2-core box a census of the
    venv's torch takes several times what it takes on an idle one."""
    from vramscope import _census
    monkeypatch.setattr(_census, "DEFAULT_BUDGET", 10.0)


def _run(loop, monitor):
    gc.collect()  # no tensor of an earlier test's loop left in a cycle

    def at_step(step):
        if step == ASK_AT:
            assert monitor.wait_for(lambda m: m._conns, 5)
            monitor._conns[0].sendall(b'{"v":1,"type":"census","id":9,"reason":"suspect"}\n')
            time.sleep(0.2)  # the sender reads requests every 50 ms
    loop(STEPS, at_step, monitor.path)
    assert monitor.wait_for(lambda m: len(_censuses(m)) >= 2, 5), _censuses(monitor)
    first, second = _censuses(monitor)[:2]
    assert first["census"]["complete"] and second["census"]["complete"]
    assert first["census"]["reason"] == "suspect" and second["census"]["reason"] == "followup"
    assert first["census"]["request"] == second["census"]["request"] == 9
    assert second["step"] - first["step"] == _census_trigger.FOLLOW_UP_STEPS
    return first, second


def _censuses(monitor):
    return [m for m in monitor.messages() if m["type"] == "census"]


def _grew(first, second):
    """The holders that hold more tensors, graphs or graph nodes at the
    second census (the diagnosis's rule, diagnose/culprit.go)."""
    key = lambda h: (h["kind"], h["name"], h["function"], h["file"])  # noqa: E731
    before = {key(h): h for h in first["census"]["holders"]}
    out = []
    for h in second["census"]["holders"]:
        o = before.get(key(h))
        if o is not None and any(h[k] > o[k] for k in ("tensors", "graphs", "graph_nodes")):
            out.append(h)
    return out


LEAKS = [
    # loop, holder name, kind, what must grow
    (leaky.losses_list, "losses_list", "losses[...]", "local", "graphs"),
    (leaky.total_loss, "total_loss", "total", "local", "graph_nodes"),
    (leaky.module_cache, "module_cache", "Cache.outputs[...]", "attr", "tensors"),
    (leaky.eval_without_no_grad, "eval_outputs", "outputs[...]", "local", "graphs"),
    (leaky.hook_features, "hook_features", "features[...]", "global", "tensors"),
]


@pytest.mark.parametrize("loop,tag,name,kind,grows", LEAKS, ids=[c[1] for c in LEAKS])
def test_the_census_names_the_holder_and_its_line(torch_mod, monitor, loop, tag, name, kind, grows):
    first, second = _run(loop, monitor)
    grew = _grew(first, second)
    assert [h["name"] for h in grew] == [name], json.dumps((first["census"], second["census"]))
    h = grew[0]
    assert h["kind"] == kind
    assert os.path.basename(h["file"]) == "leaky.py"
    assert h["line"] == _line_of(tag)
    old = [o for o in first["census"]["holders"] if o["name"] == name][0]
    assert h[grows] > old[grows]


def test_graphs_backward_freed_hold_no_saved_tensors(torch_mod, monitor):
    _, second = _run(leaky.losses_list, monitor)
    h = [h for h in second["census"]["holders"] if h["name"] == "losses[...]"][0]
    assert h["graphs"] >= ASK_AT + _census_trigger.FOLLOW_UP_STEPS
    assert h["graph_freed"] == h["graphs"] and h["graph_saved"] == 0
    assert h["first_step"] < h["last_step"] == second["step"]


def test_graphs_no_backward_ran_through_keep_their_saved_tensors(torch_mod, monitor):
    _, second = _run(leaky.eval_without_no_grad, monitor)
    h = [h for h in second["census"]["holders"] if h["name"] == "outputs[...]"][0]
    assert h["graph_freed"] == 0
    # each eval forward saves its input (64×32) and its tanh output (64×64), float32
    assert h["graph_saved"] >= h["graphs"] * (64 * 32 + 64 * 64) * 4


@pytest.mark.parametrize("loop", [leaky.constant_buffer, leaky.growing_input],
                         ids=["constant_buffer", "growing_input"])
def test_controls_name_no_holder(torch_mod, monitor, loop):
    first, second = _run(loop, monitor)
    assert _grew(first, second) == []
    if loop is leaky.constant_buffer:
        big = [h for h in second["census"]["holders"] if h["name"] == "BUFFER"]
        assert big and big[0]["bytes"] == 4 << 20 and big[0]["kind"] == "global"


def test_the_groups_add_up(torch_mod, monitor):
    first, _ = _run(leaky.losses_list, monitor)
    g = first["census"]["groups"]
    model_bytes = (32 * 64 + 64 + 64 + 1) * 4
    assert g["parameters"]["bytes"] == model_bytes
    assert g["gradients"]["bytes"] == model_bytes
    assert g["optimizer"]["bytes"] == 0  # plain SGD keeps no state


def test_census_api_returns_it(torch_mod, monitor):
    import torch
    import vramscope
    model = torch.nn.Linear(4, 4)
    keep = [torch.ones(1000) for _ in range(3)]  # noqa: F841 - what the census must find
    with vramscope.watch(model, socket=monitor.path):
        c = vramscope.census()
    assert c["type"] == "census" and c["census"]["reason"] == "user"
    names = [h["name"] for h in c["census"]["holders"]]
    assert "keep[...]" in names
    assert vramscope.census() is None  # no live watch


def test_fixture_requests_are_read_as_the_monitor_means_them():
    from conftest import ROOT
    from vramscope import _requests
    with open(os.path.join(ROOT, "testdata", "protocol", "census.json")) as f:
        fx = json.load(f)
    r = _requests.Reader()
    for case in fx["requests"]:
        assert r.feed(case["line"].encode() + b"\n") == [case["request"]]
    for line in fx["ignored_requests"]:
        assert r.feed(line.encode() + b"\n") == []
    assert r.ignored == len(fx["ignored_requests"])
    for line in fx["invalid_requests"]:
        assert r.feed(line.encode() + b"\n") == [], line
    assert r.invalid == len(fx["invalid_requests"])
    # a request cut in two arrives whole; an endless line is dropped, the next one read
    assert r.feed(b'{"v":1,"type":"cen') == [] and r.feed(b'sus","id":5}\n') == [
        {"type": "census", "id": 5, "reason": "request"}]
    assert r.feed(b"x" * 70000) == [] and r.feed(b"y\n" + fx["requests"][0]["line"].encode() + b"\n") \
        == [fx["requests"][0]["request"]]


def test_the_census_runs_none_of_the_users_code(torch_mod, monitor):
    """Containers that override iteration, a class with a ``__dict__``
    property and a lazy module's ``__getattr__`` (PEP 562) are read through
    the built-in types: none of their code runs, and what they hold is
    still found."""
    import types
    import sys
    import torch
    import vramscope
    ran = []

    class Lazy(list):
        def __iter__(self):
            ran.append("iter")
            return iter(())

    class Weird:
        @property
        def __dict__(self):
            ran.append("dict")
            return {}

    lazy_mod = types.ModuleType("lazy_user_module")
    lazy_mod.__getattr__ = lambda name: ran.append("module " + name)
    sys.modules["lazy_user_module"] = lazy_mod
    try:
        kept = Lazy([torch.ones(1000) for _ in range(3)])  # noqa: F841
        odd = Weird()  # noqa: F841
        model = torch.nn.Linear(2, 2)
        with vramscope.watch(model, socket=monitor.path):
            c = vramscope.census()
    finally:
        del sys.modules["lazy_user_module"]
    assert ran == []
    assert "kept[...]" in [h["name"] for h in c["census"]["holders"]]


def test_a_census_keeps_no_value_of_the_users_frames_alive(torch_mod):
    # Reading a function frame's f_locals (Python 3.12 and older) caches a
    # snapshot dict on the frame that keeps each value it saw alive until the
    # next read: the step's loss and its graph, or a step's logits, would
    # outlive the user's own rebinding. Seen on an H200 as 512 B more
    # allocated in every step after a census. And no reference cycle may
    # hold them until the collector runs (the frame list of the holder
    # search held its own frame, and with it the census's sample tensors:
    # 512 B more between a census and its follow-up on the H200): checked
    # with the collector off.
    import gc
    import weakref
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters())
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8)
    refs = []
    gc.collect()
    gc.disable()
    try:
        for step in range(4):
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = out.pow(2).mean()
            loss.backward()
            opt.step()
            refs.append((weakref.ref(out), weakref.ref(loss)))
            if step == 1:
                assert watcher.take_census("user") is not None
        del out, loss
        alive = [i for i, (o, l) in enumerate(refs) if o() is not None or l() is not None]
        assert alive == []
    finally:
        gc.enable()
        watcher.remove()


def test_a_census_writes_nothing_on_the_users_graphs(torch_mod):
    """The step a graph was first seen at is kept beside the tensors: the
    user's nodes' ``metadata`` stays as the user left it, and a tensor that
    died and whose id was reused by a new one is not taken for the old one."""
    from vramscope import _census
    torch = torch_mod
    model = torch.nn.Linear(8, 8)
    losses = [model(torch.randn(2, 8)).sum() for _ in range(3)]
    losses[0].grad_fn.metadata["users_own"] = 1
    first = _census.take(torch, "cpu", model, None, 3, budget=10.0)["census"]
    losses.append(model(torch.randn(2, 8)).sum())
    second = _census.take(torch, "cpu", model, None, 7, budget=10.0)["census"]
    assert [dict(t.grad_fn.metadata) for t in losses] == [{"users_own": 1}, {}, {}, {}]
    h = [h for h in second["holders"] if h["name"] == "losses[...]"][0]
    assert (h["first_step"], h["last_step"]) == (3, 7), (first, second)
    del losses[:]
    gc.collect()
    losses.append(model(torch.randn(2, 8)).sum())
    third = _census.take(torch, "cpu", model, None, 9, budget=10.0)["census"]
    h = [h for h in third["holders"] if h["name"] == "losses[...]"][0]
    assert (h["first_step"], h["last_step"]) == (9, 9)


def test_saved_tensors_split_by_module(torch_mod):
    """Each module's figure from the shapes (batch B, float32): a Linear
    saves its input; GELU saves its input, and goes with the fc2 that takes
    its output; the loss's own (log-softmax's output and the int64 targets)
    go to the head, whose output they are. Each storage once, adding up to
    the holder's graph_saved."""
    import blocks
    from vramscope import _census
    torch = torch_mod
    B = 128
    model = blocks.Net()
    loss = torch.nn.functional.cross_entropy(model(torch.randn(B, 16)), torch.randint(0, 10, (B,)))  # noqa: F841
    c = _census.take(torch, "cpu", model, None, 1, budget=10.0)["census"]
    got = {m["module"]: m["bytes"] for m in c["saved_by_module"]["modules"]}
    want = {"emb": B * 16 * 4, "head": B * 64 * 4}
    for i in range(3):
        want["blocks.%d.fc1" % i] = B * 64 * 4
        want["blocks.%d.fc2" % i] = 2 * B * 256 * 4  # its input, and GELU's
    loss_own = got["head"] - want["head"]
    assert B * 10 * 4 + B * 8 <= loss_own <= B * 10 * 4 + B * 8 + 64  # a scalar or two besides
    want["head"] += loss_own
    assert got == want
    held = [h for h in c["holders"] if h["name"] == "loss"][0]
    assert sum(got.values()) == held["graph_saved"]
    assert c["saved_by_module"]["rest"] == {"modules": 0, "bytes": 0}
    # Every saved tensor but the loss's own two (cross_entropy's inner
    # log-softmax output and nll_loss's total weight, made in C++) was once
    # a Python object: torch keeps those objects alive with the graph, the
    # collector lists them, and the "other" group counts them too.
    also = c["saved_by_module"]["also_other"]
    assert also == sum(got.values()) - B * 10 * 4 - 4
    assert also <= c["groups"]["other"]["bytes"]


def test_a_watched_loop_with_censuses_keeps_nothing_alive_without_the_collector(torch_mod, monitor):
    """The whole path the monitor's suspicion takes (request, census at a
    step's end, follow-up 5 steps later), with the collector off: each
    step's output and loss die when the loop rebinds them, as without the
    hook; a cycle anywhere in the hook that reached them would keep them."""
    import gc
    import weakref
    import vramscope
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    refs = []
    gc.collect()
    gc.disable()
    try:
        with vramscope.watch(model, opt, socket=monitor.path):
            # Steps go on until both censuses have arrived (the sender reads
            # requests every 50 ms, later on a loaded machine), 400 at most.
            for step in range(400):
                opt.zero_grad()
                out = model(x)
                loss = out.pow(2).mean()
                loss.backward()
                opt.step()
                refs.append((weakref.ref(out), weakref.ref(loss)))
                if step == ASK_AT:
                    assert monitor.wait_for(lambda m: m._conns, 5)
                    monitor._conns[0].sendall(b'{"v":1,"type":"census","id":3,"reason":"suspect"}\n')
                if step > ASK_AT and len(_censuses(monitor)) >= 2:
                    break
                time.sleep(0.01)
            del out, loss
            alive = [i for i, (o, l) in enumerate(refs) if o() is not None or l() is not None]
    finally:
        gc.enable()
    assert [c["census"]["reason"] for c in _censuses(monitor)] == ["suspect", "followup"]
    assert alive == []


def test_module_names_come_from_the_modules_own_dicts(torch_mod):
    """The split by module names modules as ``named_modules()`` does (a tied
    weight by its first owner), read from the modules' own dicts: a model
    whose ``named_modules`` is the user's own is not asked."""
    import blocks
    from vramscope import _modules
    torch = torch_mod

    class Tied(blocks.Net):
        def named_modules(self, *a, **k):
            raise AssertionError("the user's named_modules ran")

    model = Tied()
    model.blocks[1].fc1.weight = model.blocks[0].fc1.weight  # tied: blocks.0.fc1 has it first
    owners = _modules.param_owners(model)
    want = {}
    for name, m in torch.nn.Module.named_modules(model):
        for p in m._parameters.values():
            if p is not None:  # the head has no bias
                want.setdefault(id(p), name or "Tied")
    assert owners == want
    assert owners[id(model.blocks[1].fc1.weight)] == "blocks.0.fc1"
    assert owners[id(model.head.weight)] == "head"
