"""Activations follow the input size (docs/protocol.md: the batch and tokens
of forward and anatomy), on real torch."""

import pytest

from conftest import make_config, queued
from vramscope import _client, _watch

F32 = 4


def run(torch, model, sizes, make_input, every=100, kwargs=False):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    client = _client.Client(make_config(activations_every=every), start=False)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    for size in sizes:
        opt.zero_grad()
        inp = make_input(size)
        out = model(input_ids=inp) if kwargs else model(inp)
        out.float().pow(2).mean().backward()
        opt.step()
    w.remove()
    return client


def anatomy(client):
    return {m["step"]: m for m in queued(client) if m["type"] == "anatomy"}


def inputs(client):
    return [m.get("input") for m in queued(client) if m["type"] == "phase"
            and m["name"] == "forward" and m["edge"] == "begin"]


def mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_growing_batch_is_remeasured_once_per_doubling_and_scaled_otherwise(torch_mod):
    torch = torch_mod
    sizes = [4, 4, 4, 8, 12, 12, 4, 16]
    client = run(torch, mlp(torch), sizes, lambda b: torch.randn(b, 8))
    a = anatomy(client)
    # What autograd saves per sample: the input (8), the Linear output and the
    # ReLU output (16, shared storage counted once: 16), as in test_anatomy.py.
    per_sample = (8 + 16) * F32
    assert sorted(a) == [0, 1, 2, 3, 4, 6, 7]  # step 5 has step 4's size: nothing new
    for s in (0, 1, 2):
        assert a[s]["activations_source"] == "measured" and a[s]["activations"] == 4 * per_sample
    assert (a[3]["activations_source"], a[3]["activations_step"]) == ("measured", 3)
    assert a[3]["activations"] == 8 * per_sample and a[3]["activations_batch"] == 8
    # 12 is 1.5x the last measurement: scaled, labelled, and exact for this model.
    assert a[4]["activations_source"] == "scaled" and a[4]["activations_step"] == 3
    assert a[4]["activations"] == 12 * per_sample and a[4]["batch_size"] == 12
    assert a[6]["activations_source"] == "scaled" and a[6]["activations"] == 4 * per_sample
    assert a[7]["activations_source"] == "measured" and a[7]["activations"] == 16 * per_sample
    # A float feature matrix has a batch and no tokens.
    assert inputs(client) == [{"batch": b, "tokens": None} for b in sizes]


def test_sequence_length_scales_by_tokens_with_keyword_inputs(torch_mod):
    torch = torch_mod

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(100, 8)
            self.out = torch.nn.Linear(8, 100)

        def forward(self, input_ids=None):
            return self.out(self.emb(input_ids).tanh())

    lengths = [16, 16, 16, 24, 64, 64]
    client = run(torch, LM(), lengths, lambda n: torch.randint(0, 100, (2, n)), kwargs=True)
    a = anatomy(client)
    assert sorted(a) == [0, 1, 2, 3, 4]
    base = a[2]["activations"]
    assert a[2]["tokens"] == 32 and a[2]["activations_tokens"] == 32
    assert a[3]["activations_source"] == "scaled" and a[3]["tokens"] == 48
    assert a[3]["activations"] == round(base * 48 / 32)
    assert (a[4]["activations_source"], a[4]["activations_tokens"]) == ("measured", 128)
    assert a[4]["activations"] == base * 4, "saved activations grow with tokens here"
    assert all(x["batch_size"] == 2 for x in a.values())


def test_lengths_that_vary_every_step_send_a_scaled_anatomy_once_in_ten_steps(torch_mod):
    # Dynamic padding: a new length at most steps, never twice the measured
    # one. Once VARYING_RUN steps in a row came with a size other than the
    # last anatomy's, a scaled anatomy goes once in SCALED_EVERY steps (the
    # monitor scales to each step's own input, which every forward still
    # carries); a size that then holds is sent at its second step, and a
    # change after it at once.
    from vramscope import _schedule
    torch = torch_mod
    varying = [24, 20, 28, 18, 26, 22, 30, 17, 25, 19, 27, 21, 29, 23, 31, 18, 26, 20, 28, 22,
               30, 17, 25, 19]
    lengths = [16, 16, 16] + varying + [20, 20, 20, 20, 24]
    client = run(torch, mlp(torch), lengths, lambda n: torch.randn(n, 8))
    a = anatomy(client)
    run_from = 3 + _schedule.VARYING_RUN - 1  # the step whose run reaches VARYING_RUN
    assert _schedule.SCALED_EVERY == 10 and run_from == 5
    last = 3 + len(varying)  # the first step of the size that holds
    assert sorted(a) == [0, 1, 2, 3, 4, 5, 15, 25, last + 1, last + 4]
    assert all(a[s]["activations_source"] == "scaled" for s in (3, 4, 5, 15, 25, last + 1, last + 4))
    assert a[15]["batch_size"] == lengths[15] and a[15]["activations_step"] == 2
    assert [i["batch"] for i in inputs(client)] == lengths


def test_growth_by_half_alternates_scaled_and_measured(torch_mod):
    torch = torch_mod
    sizes = [4, 4, 4, 6, 9, 13, 20]
    client = run(torch, mlp(torch), sizes, lambda b: torch.randn(b, 8))
    a = anatomy(client)
    src = [a[s]["activations_source"] for s in range(3, 7)]
    # measured at 4; 6 < 8 scaled; 9 >= 8 measured; 13 < 18 scaled; 20 >= 18 measured
    assert src == ["scaled", "measured", "scaled", "measured"]


def test_a_scaled_anatomy_counts_weights_gradients_and_optimizer_at_its_own_step(torch_mod):
    # A layer unfrozen after the last measured step (gradual unfreezing):
    # its gradient and its momentum appear at the next step, whose input
    # size is new but not doubled (a scaled anatomy). Each figure is that
    # step's own, not the last measured step's.
    torch = torch_mod
    model = mlp(torch)
    first = model[0]
    for p in first.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    client = _client.Client(make_config(), start=False)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    for step, size in enumerate([4, 4, 4, 6]):
        if step == 3:
            for p in first.parameters():
                p.requires_grad_(True)
        opt.zero_grad()
        model(torch.randn(size, 8)).pow(2).mean().backward()
        opt.step()
    w.remove()
    a = anatomy(client)
    frozen = (8 * 16 + 16) * F32
    trained = (16 * 4 + 4) * F32
    assert (a[2]["gradients"], a[2]["optimizer"]) == (trained, trained)
    assert a[3]["activations_source"] == "scaled"
    assert (a[3]["gradients"], a[3]["optimizer"]) == (frozen + trained, frozen + trained)
    assert a[3]["weights"] == frozen + trained


@pytest.mark.parametrize("every", [0])
def test_without_measurement_activations_stay_unknown(torch_mod, every):
    torch = torch_mod
    client = run(torch, mlp(torch), [4, 4, 4, 8], lambda b: torch.randn(b, 8), every=every)
    a = anatomy(client)
    assert sorted(a) == [0, 1, 2]
    assert all(x["activations"] is None and x["activations_source"] is None for x in a.values())
    assert a[2]["batch_size"] == 4 and a[2]["tokens"] is None


def test_eval_with_a_larger_batch_on_a_measured_step_keeps_the_training_batch(torch_mod):
    torch = torch_mod
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    client = _client.Client(make_config(), start=False)
    _watch.Watcher(torch, client, model, opt, client.config)
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    with torch.no_grad():
        model(torch.randn(64, 8))  # inside the step, after its backward: an evaluation
    opt.step()
    (a,) = [m for m in queued(client) if m["type"] == "anatomy"]
    assert a["batch_size"] == 4 and a["tokens"] is None
    assert inputs(client) == [{"batch": 4, "tokens": None}]
    evals = [(m["edge"], m["step"]) for m in queued(client)
             if m["type"] == "phase" and m["name"] == "eval" and m.get("user")]
    assert evals == [("begin", 0), ("end", 0)], evals


def test_the_oom_runs_batch_schedule_is_measured_at_every_doubling(torch_mod):
    """oom.jsonl.gz's schedule (batch doubling every 3 steps, measured once at
    step 2 and then stale): now each doubling is measured, the figure never
    stays at the first batch's."""
    torch = torch_mod
    sizes = [4 * 2 ** (s // 3) for s in range(12)]  # 4,4,4,8,8,8,16,16,16,32,32,32
    client = run(torch, mlp(torch), sizes, lambda b: torch.randn(b, 8))
    a = anatomy(client)
    assert sorted(a) == [0, 1, 2, 3, 6, 9]
    per_sample = (8 + 16) * F32
    for s in (3, 6, 9):
        assert a[s]["activations_source"] == "measured"
        assert a[s]["activations"] == sizes[s] * per_sample == a[s]["batch_size"] * per_sample


def test_torch_113s_forward_wrapper_stays_only_for_keyword_calls(torch_mod):
    # Where pre-hooks cannot take kwargs (torch 1.13) a wrapper of the
    # instance's forward reads keyword inputs. A model called positionally has
    # its size from the pre hook: the wrapper is undone at its first training
    # forward (a frame less at every forward); keyword calls keep it.
    torch = torch_mod
    from vramscope import _patch
    if _patch.kwargs_pre_hooks(mlp(torch)):
        pytest.skip("pre-hooks take kwargs here: there is no forward wrapper")
    positional = mlp(torch)
    client = run(torch, positional, [4, 4, 8], lambda b: torch.randn(b, 8))
    assert inputs(client) == [{"batch": b, "tokens": None} for b in (4, 4, 8)]

    class Keyword(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, input_ids=None):
            return self.lin(input_ids)

    model = Keyword()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    client = _client.Client(make_config(), start=False)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    model2 = mlp(torch)
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.01)
    client2 = _client.Client(make_config(), start=False)
    w2 = _watch.Watcher(torch, client2, model2, opt2, client2.config)
    assert "forward" in model.__dict__ and "forward" in model2.__dict__
    for _ in range(2):
        for m, o, kw in ((model, opt, True), (model2, opt2, False)):
            o.zero_grad()
            x = torch.randn(3, 8)
            (m(input_ids=x) if kw else m(x)).sum().backward()
            o.step()
    assert "forward" in model.__dict__, "keyword calls keep the wrapper"
    assert "forward" not in model2.__dict__, "positional calls undo it"
    # torch 1.13 sees keyword inputs only after the begin edge was queued:
    # the step's anatomy has them (docs/hook.md), the begin edge does not.
    assert inputs(client) == [None, None]
    assert anatomy(client)[0]["batch_size"] == 3 and anatomy(client)[0]["tokens"] is None
    assert inputs(client2) == [{"batch": 3, "tokens": None}] * 2
    w.remove()
    w2.remove()


def test_tokens_only_for_integer_index_inputs(torch_mod):
    """An 8x3x64x64 image batch is batch 8 with no tokens, a
    32x64 float feature matrix batch 32 with no tokens; token ids (int64) of
    4x16 are 64 tokens. A bool mask or an int image is not token ids either,
    but an integer 2-d input is taken as ids: docs/hook.md says so."""
    torch = torch_mod
    from vramscope import _patch
    f = torch.is_tensor
    assert _patch.input_size(f, (torch.zeros(8, 3, 64, 64),), None) == {"batch": 8, "tokens": None}
    assert _patch.input_size(f, (torch.zeros(32, 64),), None) == {"batch": 32, "tokens": None}
    assert _patch.input_size(f, (torch.zeros(32, 64, dtype=torch.float16),), None)["tokens"] is None
    assert _patch.input_size(f, (torch.zeros(4, 16, dtype=torch.long),), None) == {
        "batch": 4, "tokens": 64}
    assert _patch.input_size(f, (torch.zeros(4, 16, dtype=torch.int32),), None)["tokens"] == 64
    assert _patch.input_size(f, (torch.zeros(4, 16, dtype=torch.bool),), None)["tokens"] is None

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return self.conv(x).mean((1, 2, 3))

    client = run(torch, Conv(), [8, 8], lambda b: torch.randn(b, 3, 16, 16))
    assert inputs(client) == [{"batch": 8, "tokens": None}] * 2
    emb = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 2))
    client = run(torch, emb, [4, 4], lambda b: torch.randint(0, 50, (b, 16)))
    assert inputs(client) == [{"batch": 4, "tokens": 64}] * 2
    # The same shape with another dtype is not taken from the last input's cache.
    class Floats(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.lin(x.float())

    model = Floats()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    client = _client.Client(make_config(), start=False)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    for x in (torch.randint(0, 5, (4, 8)), torch.randn(4, 8), torch.randint(0, 5, (4, 8))):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    w.remove()
    assert inputs(client) == [{"batch": 4, "tokens": 32}, {"batch": 4, "tokens": None},
                              {"batch": 4, "tokens": 32}]
