"""Anatomy: exact bytes of weights, gradients, optimizer state and saved activations."""

import pytest

import loops
from conftest import make_config, queued
from vramscope import _anatomy, _client, _watch

MiB = 1024 * 1024
F32 = 4


def run(torch, model, opt, inputs, steps=1, **cfg):
    client = _client.Client(make_config(**cfg), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(steps):
        if opt is not None:
            opt.zero_grad()
        out = model(inputs)
        out.float().pow(2).mean().backward()
        if opt is not None:
            opt.step()
    watcher.remove()
    return [m for m in queued(client) if m["type"] == "anatomy"]


def numel(shapes):
    total = 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


MLP_SHAPES = [(16, 8), (16,), (4, 16), (4,)]


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
def test_mlp_weights_gradients_and_optimizer_state(torch_mod, kind):
    torch = torch_mod
    model = mlp(torch)
    params = list(model.parameters())
    opt = {"sgd": lambda: torch.optim.SGD(params, lr=0.1),
           "momentum": lambda: torch.optim.SGD(params, lr=0.1, momentum=0.9),
           "adam": lambda: torch.optim.Adam(params)}[kind]()
    (a,) = run(torch, model, opt, torch.randn(4, 8))
    weights = numel(MLP_SHAPES) * F32
    assert a["weights"] == weights == 212 * F32
    assert a["gradients"] == weights
    assert a["params"] == 212 and a["device"] == "cpu" and a["batch_size"] == 4
    expected_state = {"sgd": 0, "momentum": weights,
                      "adam": 2 * weights + len(MLP_SHAPES) * F32}[kind]  # + a step scalar each
    assert a["optimizer"] == expected_state


def test_cnn_counts_buffers_once_with_their_dtypes(torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    (a,) = run(torch, model, opt, torch.randn(2, 3, 6, 6))
    params = numel([(8, 3, 3, 3), (8,), (8,), (8,), (10, 288), (10,)])
    buffers = 2 * 8 * F32 + 8  # running mean and var, num_batches_tracked (int64)
    assert a["params"] == params
    assert a["weights"] == params * F32 + buffers
    assert a["gradients"] == params * F32


def test_tied_weights_are_counted_once(torch_mod):
    torch = torch_mod

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(100, 16)
            self.out = torch.nn.Linear(16, 100, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, x):
            return self.out(self.emb(x))

    model = Tied()
    opt = torch.optim.Adam(model.parameters())
    (a,) = run(torch, model, opt, torch.randint(0, 100, (4, 5)))
    assert a["weights"] == a["gradients"] == 100 * 16 * F32
    assert a["params"] == 1600
    assert a["optimizer"] == 2 * 1600 * F32 + F32


def test_views_of_one_storage_count_once(torch_mod):
    torch = torch_mod
    base = torch.zeros(10, 10)
    assert _anatomy.unique_bytes([base, base[2:], base.t(), base.view(100)]) == 400
    assert _anatomy.unique_bytes([base, torch.zeros(3, dtype=torch.float64)]) == 424


def test_saved_activations_of_linear_relu_linear(torch_mod):
    torch = torch_mod
    (a,) = run(torch, mlp(torch), torch.optim.SGD(mlp(torch).parameters(), lr=0), torch.randn(32, 8))
    # the input (saved by the first Linear) and the ReLU output (saved by ReLU and
    # by the second Linear: once); weights are excluded
    assert a["activations"] == (32 * 8 + 32 * 16) * F32


def test_saved_activations_of_a_conv_block(torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
    (a,) = run(torch, model, torch.optim.SGD(model.parameters(), lr=0), torch.randn(2, 3, 16, 16))
    assert a["activations"] == (2 * 3 * 16 * 16 + 2 * 8 * 16 * 16) * F32


def test_checkpointing_drops_saved_activations(torch_mod):
    torch = torch_mod
    import torch.utils.checkpoint as cp

    class Checkpointed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = mlp(torch)

        def forward(self, x):
            return cp.checkpoint(self.body, x)

    x = torch.randn(32, 8, requires_grad=True)
    model = Checkpointed()
    (a,) = run(torch, model, torch.optim.SGD(model.parameters(), lr=0), x)
    assert a["activations"] == 32 * 8 * F32  # only the checkpoint's input
    assert x.grad is not None


def test_activations_every_schedules_measurement_and_off_installs_nothing(torch_mod, monkeypatch):
    torch = torch_mod
    made = []
    # what saved_tensors_hooks enters by, and the meter calls where it exists
    real = torch._C._autograd._push_saved_tensors_default_hooks

    def counting(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(torch._C._autograd, "_push_saved_tensors_default_hooks", counting)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    got = run(torch, model, opt, torch.randn(4, 8), steps=11, activations_every=5)
    assert [m["step"] for m in got] == [0, 1, 2, 5, 10]
    # on measured steps only: for the forward, then for the loss (until
    # backward) on the steps that take the split once a backward came
    # through the wrapper (steps 1 and 2: not step 0; 5 and 10 take none)
    assert len(made) == 5 + 2, "saved-tensor hooks only on measured steps"
    assert all(m["activations"] == (4 * 8 + 4 * 16) * F32 for m in got)
    assert [m["saved"] is not None for m in got] == [True, True, True, False, False]

    made.clear()
    got = run(torch, model, opt, torch.randn(4, 8), steps=4, activations_every=0,
              batch_size=128)
    assert [m["step"] for m in got] == [0, 1, 2]
    assert all(m["activations"] is None for m in got)
    assert all(m["batch_size"] == 128 for m in got)
    assert made == []


def test_gradient_accumulation_reports_the_largest_micro_step(torch_mod):
    torch = torch_mod
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, opt, client.config)
    opt.zero_grad()
    for batch in (4, 8):
        model(torch.randn(batch, 8)).sum().backward()
    opt.step()
    (a,) = [m for m in queued(client) if m["type"] == "anatomy"]
    assert a["activations"] == (8 * 8 + 8 * 16) * F32
    # The largest micro-step's activations go with the largest input of the step.
    assert a["batch_size"] == 8 and a["activations_batch"] == 8
    assert a["tokens"] is None, "a float input has no tokens"


def test_76m_parameters_with_adam(torch_mod):
    torch = torch_mod
    # 22873 * 3343 = 76,464,439 parameters; skip the slow random init, the
    # accounting only needs the storages
    model = torch.nn.utils.skip_init(torch.nn.Linear, 3342, 22873)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    try:
        opt = torch.optim.Adam(model.parameters(), foreach=True)  # faster on CPU
    except TypeError:  # an Adam without the foreach argument
        opt = torch.optim.Adam(model.parameters())
    (a,) = run(torch, model, opt, torch.randn(2, 3342))
    assert a["params"] == 76464439
    assert round(a["weights"] / MiB, 2) == 291.69
    assert round(a["gradients"] / MiB, 2) == 291.69
    assert round(a["optimizer"] / MiB, 2) == 583.38
    assert a["optimizer"] - 2 * a["weights"] == 2 * F32  # the two step scalars


def test_cached_figures_follow_moved_added_and_dropped_tensors(torch_mod):
    # Measured steps look tensors up by identity; a cached figure
    # must still change when a tensor's data moves, one is added or dropped.
    torch = torch_mod
    model = torch.nn.Linear(64, 32)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 64)).sum().backward()
    opt.step()
    cache = _anatomy.FigureCache()

    def both():
        cached = _anatomy.static_figures(torch, model, opt, cache)
        assert cached == _anatomy.static_figures(torch, model, opt)
        return cached

    first = both()
    assert both() == first
    model.weight.data = torch.zeros(64, 64)  # same Parameter, new and larger storage
    moved = both()
    assert moved["weights"] == first["weights"] + 32 * 64 * F32
    opt.state.clear()  # dropped optimizer state
    assert both()["optimizer"] == 0
    model.extra = torch.nn.Parameter(torch.zeros(10))  # added
    assert both()["weights"] == moved["weights"] + 10 * F32


def test_the_tree_cache_answers_as_the_walk_after_every_change(torch_mod):
    # A measured step lists the parameters and buffers from the last walk
    # while every module holds the same objects; any change walks again.
    import gc
    import weakref
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Linear(8, 2))
    tree = _anatomy.TreeCache()

    def same():
        got = tree.module_tensors(model)
        want = list(model.parameters()), list(model.buffers())
        assert [list(map(id, g)) for g in got] == [list(map(id, w)) for w in want]
        assert list(map(id, tree.modules(model))) == list(map(id, model.modules()))
        return got

    same()
    same()  # from the cache
    model[0].weight = torch.nn.Parameter(torch.zeros(8, 4))  # replaced
    same()
    model[2].bias = None  # removed
    same()
    model[1].register_buffer("extra", torch.zeros(3))  # added
    same()
    model.append(torch.nn.Linear(2, 2))  # a module added
    same()
    model[0].tied = model[3].weight  # a tensor shared by two modules: listed once
    same()
    del model[3]
    dropped = weakref.ref(model[0].tied)
    del model[0].tied
    same()
    params = same()
    del params
    gc.collect()
    assert dropped() is None, "the cache holds no tensor"


def test_the_state_cache_answers_as_the_walk_after_every_change(torch_mod, monkeypatch):
    # A measured step lists the optimizer's state tensors from the last walk
    # while each per-parameter dict holds the same tensors; numbers may change.
    import gc
    import weakref
    torch = torch_mod
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    cache = _anatomy.StateCache()
    w, b = model.weight, model.bias

    def same():
        got = cache.tensors(opt.state, torch.Tensor, torch.is_tensor)
        want = _anatomy.state_tensors(opt.state, torch.Tensor, torch.is_tensor)
        assert list(map(id, got)) == list(map(id, want))
        return got

    first = same()
    walks = []
    walk = _anatomy.state_tensors
    monkeypatch.setattr(_anatomy, "state_tensors", lambda *a: walks.append(1) or walk(*a))
    assert all(a is b for a, b in zip(cache.tensors(opt.state, torch.Tensor, torch.is_tensor),
                                       first))
    assert walks == [], "answered from the cache"
    opt.state[w]["note"] = 3  # a number: holds no tensor
    same()
    opt.state[w]["note"] = 4.5
    same()
    opt.state[w]["note"] = torch.zeros(2)  # a number became a tensor
    same()
    opt.state[w]["exp_avg"] = torch.zeros(3, 4)  # a tensor replaced
    same()
    opt.state[b]["extra"] = [torch.zeros(1)]  # a container: walked every time
    same()
    same()
    del opt.state[b]["extra"]
    dropped = weakref.ref(opt.state[w]["note"])
    del opt.state[w]["note"]  # a tensor dropped
    same()
    opt.state[b] = {}
    same()
    gc.collect()
    assert dropped() is None, "the cache holds no tensor"


def test_the_hook_keeps_no_tensor_of_the_users_alive(torch_mod):
    # Measured steps cache each tensor's storage between steps. The cache must
    # not own the tensors: a gradient that zero_grad(set_to_none=True) drops
    # is freed at once with the hook as without it. Holding it kept one set
    # of gradients alive on an H200 (seed001: 1651 MiB after zero_grad, not
    # 1370), which moved the user's own memory_allocated() prints.
    import gc
    import weakref
    torch = torch_mod
    model = mlp(torch)
    opt = torch.optim.Adam(model.parameters())
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    grads = []
    for _ in range(4):  # steps 0-2 are measured, step 3 is plain
        opt.zero_grad(set_to_none=True)
        model(torch.randn(4, 8)).pow(2).mean().backward()
        grads += [weakref.ref(p.grad) for p in model.parameters()]
        opt.step()
    states = [weakref.ref(v) for st in opt.state.values() for v in st.values()
              if torch.is_tensor(v)]
    opt.zero_grad(set_to_none=True)
    opt.state.clear()  # the user drops the optimizer's state (a new optimizer, unfreezing)
    gc.collect()
    assert [r for r in grads if r() is not None] == []
    assert [r for r in states if r() is not None] == []
    watcher.remove()


def _live_storage_bytes(torch):
    import gc
    import warnings
    seen = {}
    with warnings.catch_warnings():  # isinstance() wakes torch's deprecated aliases
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            if isinstance(o, torch.Tensor):
                key, size = _anatomy.storage_of(o)
                seen[key] = size
    return sum(seen.values())


def _loop_live_bytes(torch, hook):
    import gc
    gc.collect()
    base = _live_storage_bytes(torch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.Adam(model.parameters())
    watcher = None
    if hook:
        client = _client.Client(make_config(), start=False)
        watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(16, 32)
    out = []
    for _ in range(5):  # measured steps 0-2, then plain ones
        opt.zero_grad(set_to_none=True)
        out.append(_live_storage_bytes(torch))
        y = model(x)
        out.append(_live_storage_bytes(torch))
        loss = y.pow(2).mean()
        out.append(_live_storage_bytes(torch))
        loss.backward()
        out.append(_live_storage_bytes(torch))
        opt.step()
        del y, loss
        out.append(_live_storage_bytes(torch))
    if watcher is not None:
        watcher.remove()
    return [b - base for b in out]


def test_live_tensor_bytes_are_the_same_with_and_without_the_hook(torch_mod):
    # The class behind the test above: after every phase of every step,
    # measured or plain, the bytes of the user's live tensors are what they
    # are without the hook.
    assert _loop_live_bytes(torch_mod, True) == _loop_live_bytes(torch_mod, False)


def test_an_optimizer_that_holds_another_counts_both_states(torch_mod):
    # SAM keeps each weight's move in its own state and steps a base
    # optimizer it holds, which keeps its momentum (loops.sharpness_aware):
    # both are optimizer memory, in the anatomy and in a census.
    torch = torch_mod
    torch.manual_seed(0)
    model = mlp(torch)
    opt = loops.sharpness_aware(torch)(model.parameters(), torch.optim.SGD, lr=0.1,
                                       momentum=0.9)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8)
    for _ in range(2):
        model(x).pow(2).mean().backward()
        opt.first_step(zero_grad=True)
        model(x).pow(2).mean().backward()
        opt.second_step(zero_grad=True)
    census = watcher.take_census("request")
    watcher.remove()
    weights = sum(p.numel() for p in model.parameters()) * F32
    moves = sum(s["e"].numel() for s in opt.state.values()) * F32
    momentum = sum(s["momentum_buffer"].numel()
                   for s in opt.base_optimizer.state.values()) * F32
    assert moves == momentum == weights
    got = [m["optimizer"] for m in queued(client) if m["type"] == "anatomy"]
    assert got and set(got[1:]) == {moves + momentum}
    groups = {g["kind"]: g for g in census["census"]["groups"]} \
        if isinstance(census["census"].get("groups"), list) else census["census"]["groups"]
    assert groups["optimizer"]["bytes"] == moves + momentum
