"""Saved activations by module, the loss's own saved tensors, and the blocks'
inputs a checkpoint would keep (docs/anatomy.md, "By module"). Every size is
computed by hand from the ops' documented saved tensors."""

import json
import os
import warnings

import pytest

from conftest import ROOT, make_config, queued
from vramscope import _anatomy, _client, _meter, _modules, _safe, _saved_hooks, _watch

F32, I64 = 4, 8


def measure(torch, model, inputs, loss=None, steps=1, opt=True):
    """Run ``steps`` watched steps; return the anatomy messages."""
    client = _client.Client(make_config(), start=False)
    o = torch.optim.SGD(model.parameters(), lr=0.0) if opt else None
    watcher = _watch.Watcher(torch, client, model, o, client.config)
    loss = loss or (lambda out: out.pow(2).mean())
    for _ in range(steps):
        if o is not None:
            o.zero_grad()
        loss(model(*inputs)).backward()
        if o is not None:
            o.step()
    watcher.remove()
    return [m for m in queued(client) if m["type"] == "anatomy"]


def measure_last(torch, model, inputs, loss=None):
    """The anatomy of step 1: the loss is measured once a backward came
    through the hook's wrapper (step 0's)."""
    first, second = measure(torch, model, inputs, loss, steps=2)
    assert first["saved"]["loss"] is None and first["activations"] == second["activations"]
    return second


def by_name(entries):
    return {e["module"]: e for e in entries}


def check_totals(a):
    s = a["saved"]
    assert sum(e["bytes"] for e in s["modules"]) + s["rest"]["bytes"] == a["activations"]
    assert sum(e["bytes"] for e in s["blocks"]) + s["blocks_rest"]["bytes"] == a["activations"]


def transformer(torch, layers, d):
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.proj = torch.nn.Linear(d, d)

        def forward(self, x):
            q, k, v = self.qkv(x).split(d, -1)
            # unscaled: a Python scale would add its 0-dim wrapped number (8 bytes)
            scores = q @ k.transpose(1, 2)
            return self.proj(scores.softmax(-1) @ v)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attention()
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.ReLU(),
                                           torch.nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(x)
            return x + self.mlp(x)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block() for _ in range(layers)])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    return Model()


def test_transformer_blocks_attention_scores_outweigh_the_mlp(torch_mod):
    torch = torch_mod
    B, T, D, L = 2, 128, 16, 2
    a = measure_last(torch, transformer(torch, L, D), (torch.randn(B, T, D),))
    btd, btt = B * T * D * F32, B * T * T * F32
    m = by_name(a["saved"]["modules"])
    # attn's own ops: the q/k/v views keep qkv's whole output (3 BTD) for the
    # two matmuls; the softmax keeps its result, the scores (BTT).
    assert m["blocks.*.attn"] == {"module": "blocks.*.attn", "count": L,
                                  "bytes": L * (3 * btd + btt), "largest": btt}
    assert m["blocks.*.attn.qkv"]["bytes"] == L * btd  # its input
    assert m["blocks.*.attn.proj"]["bytes"] == L * btd  # softmax @ v
    assert m["blocks.*.mlp.0"]["bytes"] == L * btd  # its input (after the residual)
    assert m["blocks.*.mlp.1"] == {"module": "blocks.*.mlp.1", "count": L,
                                   "bytes": L * 4 * btd, "largest": 4 * btd}  # ReLU's result
    assert "blocks.*.mlp.2" not in m  # its input is the ReLU output, counted once
    assert a["saved"]["modules"][0]["module"] == "blocks.*.attn"
    assert btt > 4 * btd, "at T=128 the attention scores outweigh the MLP's hidden layer"
    assert a["activations"] == L * (10 * btd + btt)
    (blk,) = a["saved"]["blocks"]
    assert blk == {"module": "blocks.*", "count": L, "own": False,
                   "bytes": L * (10 * btd + btt), "kept": L * btd}
    assert a["saved"]["loss"] == {"bytes": btd, "largest": btd, "tensors": 1}  # pow's input
    check_totals(a)


def test_cnn_first_convolutions_dominate(torch_mod):
    torch = torch_mod
    nn = torch.nn

    def stage(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))

    model = nn.Sequential(stage(3, 16), stage(16, 32), stage(32, 64),
                          nn.Sequential(nn.Flatten(), nn.Linear(64 * 4 * 4, 10)))
    N = 2
    a = measure_last(torch, model, (torch.randn(N, 3, 32, 32),))
    m = by_name(a["saved"]["modules"])
    # conv: its input; ReLU: its result; max pool: its indices (int64), its
    # input being the ReLU's result; Linear: its (flattened) input.
    want = {"0.0": N * 3 * 32 * 32 * F32, "0.1": N * 16 * 32 * 32 * F32,
            "0.2": N * 16 * 16 * 16 * I64,
            "1.0": N * 16 * 16 * 16 * F32, "1.1": N * 32 * 16 * 16 * F32,
            "1.2": N * 32 * 8 * 8 * I64,
            "2.0": N * 32 * 8 * 8 * F32, "2.1": N * 64 * 8 * 8 * F32,
            "2.2": N * 64 * 4 * 4 * I64,
            "3.1": N * 64 * 4 * 4 * F32}
    assert {k: e["bytes"] for k, e in m.items()} == want
    assert all(e["count"] == 1 for e in m.values()), "different stages are not collapsed"
    blocks = by_name(a["saved"]["blocks"])
    assert blocks["0"]["bytes"] == want["0.0"] + want["0.1"] + want["0.2"] == 221184
    assert blocks["0"]["kept"] == N * 3 * 32 * 32 * F32  # the image, saved by conv 0.0
    assert a["saved"]["blocks"][0]["module"] == "0"
    assert blocks["0"]["bytes"] > a["activations"] / 2, "the first stage holds most of it"
    check_totals(a)


def checkpointed_mlp(torch, layers, d, use_checkpoint, reentrant=True):
    import torch.utils.checkpoint as cp
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(d, d)
            self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(),
                                                       nn.Linear(4 * d, d))
                                         for _ in range(layers)])

        def forward(self, x):
            x = self.inp(x)
            for b in self.blocks:
                x = cp.checkpoint(b, x, use_reentrant=reentrant) if use_checkpoint else b(x)
            return x

    return Model()


def test_checkpoint_keeps_only_its_inputs_and_the_advice_estimate_is_exact(torch_mod):
    torch = torch_mod
    N, D, L = 32, 16, 3
    nd = N * D * F32
    torch.manual_seed(0)
    plain = measure_last(torch, checkpointed_mlp(torch, L, D, False), (torch.randn(N, D),))
    ckpt = measure_last(torch, checkpointed_mlp(torch, L, D, True), (torch.randn(N, D),))
    blocks = by_name(plain["saved"]["blocks"])
    # each block: its input (Linear 0) and the ReLU's result (4 ND)
    assert blocks["blocks.*"] == {"module": "blocks.*", "count": L, "own": False,
                                  "bytes": L * 5 * nd, "kept": L * nd}
    assert plain["activations"] == nd + L * 5 * nd  # + inp's input
    # Under the checkpoint the blocks save nothing; the checkpoint function,
    # called by the model's own forward, saves each block's input.
    m = by_name(ckpt["saved"]["modules"])
    assert {k: e["bytes"] for k, e in m.items()} == {"inp": nd, "": L * nd}
    assert ckpt["activations"] == nd + L * nd
    saving = blocks["blocks.*"]["bytes"] - blocks["blocks.*"]["kept"]
    assert plain["activations"] - ckpt["activations"] == saving
    check_totals(plain)
    check_totals(ckpt)


def seed001(torch, scale):
    """The seed-001 forum model (shared/recordings/h100/seed001.py) on CPU."""
    import argparse
    nn, F = torch.nn, torch.nn.functional
    from torch.nn.utils.rnn import pack_padded_sequence as pack, pad_packed_sequence as unpack
    s = scale
    a = argparse.Namespace(attention_size=int(1000 * s), hidden_size=int(1000 * s),
                           input_size=int(500 * s), pad_id=0, vocab_size=int(30000 * s),
                           batch_size=max(2, int(80 * s)), eos_id=1)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(a.input_size, a.hidden_size, bidirectional=True, batch_first=True)
            self.embedding = nn.Embedding(a.vocab_size, a.input_size, padding_idx=a.pad_id)

        def forward(self, inp):
            mask = inp.eq(a.pad_id)
            T = inp.size(1)
            lens = T - mask.sum(1)
            x, hx = self.rnn(pack(self.embedding(inp), lens.tolist(), True))
            x, _ = unpack(x, batch_first=True, total_length=T)
            return {"feature": x, "hidden": hx[1], "mask": mask}

    class Attention(nn.Module):
        def __init__(self, q, att):
            super().__init__()
            self.map_query = nn.Linear(q, att)
            self.v = nn.Linear(att, 1)

        def forward(self, query, keys, values, mask):
            x = keys + self.map_query(query).unsqueeze(1)
            x = self.v(torch.tanh(x)).squeeze(-1)
            x.data.masked_fill_(mask, -float("inf"))
            x = F.softmax(x, -1)
            return torch.bmm(x.unsqueeze(1), values).squeeze(1)

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            h = a.hidden_size
            self.encoder = Encoder()
            self.map_k = nn.Sequential(nn.Linear(2 * h, a.attention_size), nn.Tanh())
            self.dec_init = nn.Sequential(nn.Linear(h, h), nn.Tanh())
            self.embedding = nn.Embedding(a.vocab_size, a.input_size, a.pad_id)
            self.cell0 = nn.GRUCell(a.input_size, h)
            self.attention = Attention(h, a.attention_size)
            self.cell1 = nn.GRUCell(2 * h, h)
            self.generator = nn.Sequential(nn.Linear(a.input_size + 3 * h, a.input_size),
                                           nn.Tanh(), nn.Linear(a.input_size, a.vocab_size))

        def forward(self, x_in, y_in):
            enc = self.encoder(x_in)
            K, V, mask = self.map_k(enc["feature"]), enc["feature"], enc["mask"]
            h = self.dec_init(enc["hidden"])
            y_in = F.pad(y_in, [1, 0], value=a.eos_id)[:, :-1]
            x = self.embedding(y_in)
            hs, ctxs = [], []
            for x_i in x.split(1, 1):
                h = self.cell0(x_i.squeeze(1), h)
                ctx = self.attention(h, K, V, mask)
                h = self.cell1(ctx, h)
                hs.append(h)
                ctxs.append(ctx)
            return self.generator(torch.cat([x, torch.stack(hs, 1), torch.stack(ctxs, 1)], -1))

    return Seq2Seq(), a


def test_seed001_loss_log_softmax_is_the_largest_single_item(torch_mod):
    torch = torch_mod
    model, a = seed001(torch, 0.1)
    B, T, V = a.batch_size, 50, a.vocab_size
    crit = torch.nn.CrossEntropyLoss(ignore_index=a.pad_id, reduction="sum")
    x = torch.ones(B, T, dtype=torch.long) * 2
    y = torch.ones(B, T, dtype=torch.long) * 2

    def loss(logit):
        return crit(logit.view(-1, logit.size(-1)), y.view(-1)) / B

    an = measure_last(torch, model, (x, y), loss)
    s = an["saved"]
    log_softmax = B * T * V * F32  # 8 x 50 x 3000 fp32
    # cross-entropy = log_softmax (saves its result) + nll_loss (saves the
    # target, int64, and its total weight, one fp32 scalar); torch 1.13's
    # "/ B" saves B too, as a 0-dim int64 tensor (a wrapped number)
    divisor = I64 if torch.__version__.startswith("1.") else 0
    assert s["loss"] == {"bytes": log_softmax + B * T * I64 + F32 + divisor,
                         "largest": log_softmax, "tensors": 3 + (divisor > 0)}
    assert all(e["largest"] < log_softmax for e in s["modules"])
    # the model's largest item: the generator's Tanh output (B x T x input)...
    gen = by_name(s["modules"])
    assert gen["generator.1"]["largest"] == B * T * a.input_size * F32
    # ... and its input, the concatenation (B x T x (input + 3 hidden))
    assert gen["generator.0"]["largest"] == B * T * (a.input_size + 3 * a.hidden_size) * F32
    # the decoder cells run once per target position: 50 calls of each
    assert gen["cell0"]["count"] == 1 and gen["cell1"]["count"] == 1
    assert s["loss"]["bytes"] > max(b["bytes"] for b in s["blocks"]) / 2
    check_totals(an)


def test_module_map_collapses_only_identical_numeric_siblings(torch_mod):
    torch = torch_mod
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 4), nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)]),
                          nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 8)]))
    mm = _modules.ModuleMap(model)
    labels = {lab for lab in mm.label}
    assert labels == {"", "0", "1", "1.*", "2", "2.0", "2.1"}
    per_label, per_unit = mm.counts()
    assert per_label["1.*"] == 2
    units = {tuple(u) for u in mm.units}
    assert ("1.*", False) in units and ("1", True) in units and ("2", False) in units


def test_top_list_is_bounded_and_the_rest_keeps_the_total(torch_mod):
    torch = torch_mod
    nn = torch.nn
    layers = [nn.Linear(8 + i, 8 + i + 1) for i in range(20)]  # all different: no collapse
    model = nn.Sequential(*[m for pair in zip(layers, [nn.Tanh() for _ in layers]) for m in pair])
    a = measure_last(torch, model, (torch.randn(4, 8),))
    s = a["saved"]
    assert len(s["modules"]) == _modules.TOP_MODULES
    # entries: the first Linear (its input) and the 20 Tanh (their results,
    # which the next Linear saves too)
    assert s["rest"]["modules"] == 21 - _modules.TOP_MODULES
    assert len(s["blocks"]) == _modules.TOP_BLOCKS
    sizes = [e["bytes"] for e in s["modules"]]
    assert sizes == sorted(sizes, reverse=True)
    check_totals(a)


def test_plain_steps_install_no_module_hooks(torch_mod, monkeypatch):
    torch = torch_mod
    import torch.nn.modules.module as mod
    made = []
    real = mod.register_module_forward_pre_hook

    def counting(hook):
        made.append(1)
        return real(hook)

    monkeypatch.setattr(mod, "register_module_forward_pre_hook", counting)
    got = measure(torch, transformer(torch, 2, 8), (torch.randn(2, 4, 8),), steps=6)
    assert [m["step"] for m in got] == [0, 1, 2]
    assert len(made) == 3, "global module hooks on measured steps only"
    assert not getattr(mod, "_global_forward_pre_hooks", {}), "all removed"
    assert not getattr(mod, "_global_forward_hooks", {})


def test_user_saved_tensor_hooks_leave_the_loss_unmeasured(torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(2):
        opt.zero_grad()
        with torch.autograd.graph.save_on_cpu():
            loss = model(torch.randn(4, 8)).pow(2).sum()
        loss.backward()
        opt.step()
    watcher.remove()
    hooks = _saved_hooks.SavedHooks(torch)
    assert hooks.top() is None
    anatomy = [m for m in queued(client) if m["type"] == "anatomy"]
    if hooks.exact:
        assert [m["saved"]["loss"] for m in anatomy] == [None] * 2  # unknown, not zero
    else:  # torch 1.13: the meter steps aside under the user's hooks
        assert [m["activations"] for m in anatomy] == [None] * 2


def test_the_shared_fixture_keeps_the_invariants_the_hook_keeps():
    # testdata/protocol/valid.jsonl's by-module anatomy: the seed-001 model
    # at scale 0.1 as this hook measured it (torch 1.13, CPU).
    with open(os.path.join(ROOT, "testdata", "protocol", "valid.jsonl")) as f:
        msgs = [json.loads(line) for line in f if line.strip()]
    (a,) = [m for m in msgs if m["type"] == "anatomy" and m.get("saved")]
    check_totals(a)
    s = a["saved"]
    assert len(s["modules"]) <= _modules.TOP_MODULES and len(s["blocks"]) <= _modules.TOP_BLOCKS
    assert s["loss"]["largest"] == 8 * 50 * 3000 * F32
    assert all(b["kept"] is None if b["own"] else 0 <= b["kept"] for b in s["blocks"])


def test_a_backward_past_the_wrapper_leaves_no_saved_tensor_hook_behind(torch_mod):
    # torch.autograd.grad bypasses the wrapper: the loss window, opened once
    # backwards came through it, is closed on this thread by the next step's
    # hooks, never from inside the engine.
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8)
    for wrapped in (True, False, False, True, False):
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        if wrapped:
            loss.backward()
        else:
            torch.autograd.grad(loss, list(model.parameters()))
        opt.step()
    watcher.remove()
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    if top is not None:
        assert top(False) is None
    y = model(x).sum()  # saves tensors with no hook of ours in force
    y.backward()
    got = [m for m in queued(client) if m["type"] == "anatomy"]
    assert [m["step"] for m in got] == [0, 1, 2]
    assert got[1]["saved"]["loss"] == {"bytes": 4 * 4 * F32, "largest": 4 * 4 * F32,
                                       "tensors": 1}  # pow's input, the output


def test_a_forward_that_raises_leaves_no_module_on_the_stack(torch_mod):
    torch = torch_mod
    nn = torch.nn

    class Flaky(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("bad batch")
            return x

    model = nn.Sequential(nn.Linear(8, 16), nn.Sequential(nn.ReLU(), Flaky()), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    x = torch.randn(4, 8)
    for _ in range(4):
        opt.zero_grad()
        try:
            loss = model(x).pow(2).sum()
        except RuntimeError:
            continue  # step 1's forward raised inside 1.1
        loss.backward()
        opt.step()
    watcher.remove()
    import torch.nn.modules.module as mod
    assert not getattr(mod, "_global_forward_pre_hooks", {})
    got = [m for m in queued(client) if m["type"] == "anatomy"]
    s = got[-1]["saved"]
    # ReLU (inside 1) keeps its result; nothing is left to the model's own ops
    assert {e["module"]: e["bytes"] for e in s["modules"]} == {"0": 4 * 8 * F32, "1.0": 4 * 16 * F32}
    assert s["loss"] == {"bytes": 4 * 4 * F32, "largest": 4 * 4 * F32, "tensors": 1}


def test_module_hooks_ignore_other_threads(torch_mod):
    import threading
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    ms = _modules.ModuleStack(_modules.ModuleMap(model), torch.Tensor)
    ms.thread = threading.get_ident()
    t = threading.Thread(target=ms.pre, args=(model[0], (torch.randn(2, 4),)))
    t.start()
    t.join()
    assert ms.stack == [] and ms.inputs == {}
    ms.pre(model[0], (torch.randn(2, 4),))
    assert ms.stack == [1] and sum(ms.inputs[1].values()) == 2 * 4 * F32
    ms.post(model[0], (), None)
    assert ms.stack == []


def test_the_split_is_made_as_the_message_is_encoded(torch_mod):
    # The training thread queues the split's inputs; the sender's encoder
    # makes it. The line is what the dict it stands for encodes to.
    from vramscope import _messages
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    a = measure(torch, model, (torch.randn(3, 4),), steps=2)[-1]
    split = a["saved"]
    assert isinstance(split, _modules.Split)
    # A queued message may outlive the watcher: the split keeps no module.
    assert isinstance(split._args[0], _modules.Labels)
    line = json.loads(_messages.encode(a))
    assert line["saved"] == dict(split) and line["saved"]["modules"]
    check_totals(a)
    # A split that cannot be made encodes as null, reported, never raised.
    from vramscope import _safe
    before = _safe.errors()
    broken = _modules.Split(None, {0: [4]}, {}, {}, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert json.loads(_messages.encode(dict(a, saved=broken)))["saved"] is None
    assert _safe.errors() == before + 1


# A user's own saved-tensor hooks (docs/anatomy.md, "Under a user's own
# saved-tensor hooks"): autograd applies only the top pair, so the meter's,
# pushed at a measured forward's start, must call theirs.
def users_hooks(torch, kind):
    """A pair of saved-tensor hooks of ``kind`` and the list of what their
    pack was given and what it kept."""
    seen = []

    class Box:  # an object of the user's own, which may hold anything
        def __init__(self, t):
            self.t = t

    def pack(t):
        if kind == "identity":
            kept = t
        elif kind == "copy":  # save_on_cpu's shape: a device and a copy
            kept = (t.device, t.clone())
        else:
            kept = Box(t)
        seen.append(kept)
        return kept

    def unpack(kept):
        return kept if kind == "identity" else kept[1] if kind == "copy" else kept.t
    return seen, torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def run_under_users_hooks(torch, kind, watched, steps=4):
    """Steps of a small MLP with the forward and loss under the user's
    hooks; return (packs per step, anatomy messages, final weights, what
    the last step's pack kept)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config) if watched else None
    per, kept = [], None
    for _ in range(steps):
        opt.zero_grad()
        seen, ctx = users_hooks(torch, kind)
        with ctx:
            loss = model(torch.randn(4, 8)).pow(2).sum()
        loss.backward()
        opt.step()
        per.append(len(seen))
        kept = seen
    if watcher is not None:
        watcher.remove()
    weights = [p.detach().clone() for p in model.parameters()]
    return per, [m for m in queued(client) if m["type"] == "anatomy"], weights, kept


@pytest.mark.parametrize("kind", ["identity", "copy", "box"])
def test_a_users_saved_tensor_hooks_see_every_tensor_on_measured_steps(torch_mod, kind):
    torch = torch_mod
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = _safe.errors()
        plain_per, _, plain_w, _ = run_under_users_hooks(torch, kind, False)
        per, anatomy, w, kept = run_under_users_hooks(torch, kind, True)
    assert _safe.errors() == before
    assert per == plain_per, "the user's pack is given every saved tensor, measured steps too"
    assert all(torch.equal(a, b) for a, b in zip(w, plain_w))
    measured = [m for m in anatomy if m["activations_source"] == "measured"]
    if kind == "box" or not _saved_hooks.SavedHooks(torch).exact:
        # what the user's objects hold is out of the meter's sight; on
        # torch 1.13 the meter steps aside under any user's hooks
        assert [m["activations"] for m in anatomy] == [None] * len(anatomy)
        assert not measured
        return
    assert [m["step"] for m in measured] == [0, 1, 2]
    # what autograd holds is what the user's pack kept: step 3's packs
    # (unmeasured) kept what those of the measured steps did, the loss's
    # (pow) last, outside the model's forward and not in its figure
    model_kept = kept[:-1]
    if kind == "identity":  # the saved tensors themselves, parameters excluded
        want = torch.randn(4, 8).nelement() * F32 + 4 * 16 * F32  # the input, the ReLU's output
    else:  # a copy of each, each its own storage, the weights' copies too
        want = sum(k[1].nelement() * k[1].element_size() for k in model_kept)
    assert {m["activations"] for m in measured} == {want}
    assert [m["saved"]["loss"] for m in measured] == [None] * 3, "unknown under the user's hooks"


def test_a_checkpoint_of_the_whole_model_recomputes_on_measured_steps_too(torch_mod):
    # checkpoint(model, x) runs the model's forward under torch's own
    # saved-tensor hooks; ours shadowed them on measured steps (torch 1.13:
    # the backward raised IndexError inside checkpoint's recomputation).
    torch = torch_mod
    from torch.utils.checkpoint import checkpoint

    def run(watched):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        client = _client.Client(make_config(), start=False)
        watcher = _watch.Watcher(torch, client, model, opt, client.config) if watched else None
        recomputed = []
        model[1].register_forward_hook(lambda *a: recomputed.append(torch.is_grad_enabled()))
        for _ in range(4):
            opt.zero_grad()
            out = checkpoint(model, torch.randn(4, 8), use_reentrant=False)
            out.pow(2).sum().backward()
            opt.step()
        if watcher is not None:
            watcher.remove()
        return ([p.detach().clone() for p in model.parameters()], recomputed,
                [m for m in queued(client) if m["type"] == "anatomy"])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = _safe.errors()
        plain_w, plain_rec, _ = run(False)
        w, rec, anatomy = run(True)
    assert _safe.errors() == before
    assert all(torch.equal(a, b) for a, b in zip(w, plain_w))
    assert rec == plain_rec and len(rec) == 8, "each step's forward, and again in its backward"
    # the model's forward saves nothing autograd keeps: checkpoint keeps
    # placeholders and recomputes (torch 1.13: the meter steps aside)
    want = [(0, 0), (1, 0), (2, 0)] if _saved_hooks.SavedHooks(torch).exact else []
    assert [(m["step"], m["activations"]) for m in anatomy
            if m["activations_source"] == "measured"] == want


def test_a_non_reentrant_checkpoint_inside_the_model_keeps_its_inputs_or_is_unknown(torch_mod):
    # Its saved-tensor hooks go on top of the meter's. torch 2.x saves each
    # checkpoint's inputs through autograd first (under the meter's hooks),
    # as the reentrant checkpoint does; torch 1.13 keeps them in a closure,
    # out of the meter's sight, and it sees the push (_saved_hooks).
    torch = torch_mod
    N, D, L = 32, 16, 3
    nd = N * D * F32
    torch.manual_seed(0)
    got = measure(torch, checkpointed_mlp(torch, L, D, True, reentrant=False),
                  (torch.randn(N, D),), steps=2)[1]
    if hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks"):
        assert got["activations"] == nd + L * nd  # as the reentrant checkpoint's
        assert got["activations_source"] == "measured"
    else:
        assert got["activations"] is None and got["activations_source"] is None


def test_a_forward_where_saved_tensor_hooks_are_disabled_is_unmeasured(torch_mod):
    # torch.func.vmap disables saved-tensor hooks: a push raises there.
    torch = torch_mod
    graph = torch.autograd.graph
    if not hasattr(graph, "disable_saved_tensors_hooks"):
        pytest.skip("this torch cannot disable saved-tensor hooks")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    before = _safe.errors()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            opt.zero_grad()
            with graph.disable_saved_tensors_hooks("no hooks here"):
                loss = model(torch.randn(4, 8)).pow(2).sum()
            loss.backward()
            opt.step()
    watcher.remove()
    assert _safe.errors() == before
    assert [m["activations"] for m in queued(client) if m["type"] == "anatomy"] == [None] * 2
    mod = torch.nn.modules.module
    assert not getattr(mod, "_global_forward_pre_hooks", {}), "the module hooks removed"
    assert not getattr(mod, "_global_forward_hooks", {})


def test_held_tensors_looks_one_level_into_what_a_pack_returned(torch_mod):
    torch = torch_mod
    t = torch.zeros(2)
    cpu = t.device
    held = _meter.held_tensors
    assert held(t, cpu, torch.Tensor) == [t]
    assert held(t, torch.device("meta"), torch.Tensor) == []
    assert held((cpu, t), cpu, torch.Tensor) == [t]
    assert held([None, 3, t.dtype, t.shape, t], cpu, torch.Tensor) == [t]
    assert held(7, cpu, torch.Tensor) == [] and held(None, cpu, torch.Tensor) == []
    assert held(object(), cpu, torch.Tensor) is None
    assert held((t, object()), cpu, torch.Tensor) is None


def test_bindings_replaced_around_a_watch_never_leave_a_users_pack_unseen(torch_mod, monkeypatch):
    # torch 1.13's stack of the hooks in force is kept by wrappers of the
    # push and pop bindings (_saved_hooks); a test or a tool that replaces
    # one of them, before or after, must not make it stale: the meter then
    # never calls a pack it was told of, and the user's keep every tensor.
    torch = torch_mod
    ag = torch._C._autograd
    real = ag._push_saved_tensors_default_hooks
    monkeypatch.setattr(ag, "_push_saved_tensors_default_hooks", lambda *a: real(*a))
    first = run_under_users_hooks(torch, "identity", True)[0]
    monkeypatch.undo()
    then = run_under_users_hooks(torch, "identity", True)[0]
    monkeypatch.setattr(ag, "_pop_saved_tensors_default_hooks",
                        getattr(ag, "_pop_saved_tensors_default_hooks"))
    last = run_under_users_hooks(torch, "identity", True)[0]
    assert first == then == last == run_under_users_hooks(torch, "identity", False)[0]


def test_a_forward_under_a_function_dynamo_leaves_alone_is_measured(torch_mod):
    # torch._dynamo.disable's wrapper is a frame of dynamo's eval_frame.py,
    # as a compiled call's is; torch.utils.checkpoint runs under one on
    # torch 2.x. Nothing is compiled under it: the meter stays.
    torch = torch_mod
    dynamo = pytest.importorskip("torch._dynamo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
    run = dynamo.disable(lambda x: model(x))
    got = measure(torch, model, (torch.randn(4, 8),), steps=2,
                  loss=lambda out: out.pow(2).mean())
    client = _client.Client(make_config(), start=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(2):
        opt.zero_grad()
        run(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
    watcher.remove()
    under = [m for m in queued(client) if m["type"] == "anatomy"]
    assert [m["activations"] for m in under] == [m["activations"] for m in got] \
        == [(4 * 8 + 4 * 16) * F32] * 2


def test_runs_compiled_from_the_modules_list_answers_as_the_walk(torch_mod):
    # A measured step asks whether the model runs compiled code with the
    # modules the tree cache listed (maps in C); it must answer as the walk
    # over model.modules() does for each way a module is compiled.
    torch = torch_mod
    import functools

    def compiled_fn(*a):
        return None

    compiled_fn._torchdynamo_orig_callable = lambda *a: None  # what torch.compile makes

    class Optimized(torch.nn.Module):  # holds its original as _orig_mod, as OptimizedModule does
        def __init__(self, m):
            super().__init__()
            self._orig_mod = m

    def build():
        return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.ReLU()))

    @functools.wraps(compiled_fn)
    def wrapper(*a):
        return compiled_fn(*a)

    cases = {"plain": lambda m: None,
             "submodule compiled": lambda m: m.append(Optimized(torch.nn.Linear(2, 2))),
             "Module.compile()": lambda m: setattr(m[1][0], "_compiled_call_impl", compiled_fn),
             "forward compiled": lambda m: m[0].__dict__.__setitem__("forward", compiled_fn),
             "training_step wrapped": lambda m: m[1].__dict__.__setitem__("training_step", wrapper),
             "forward plain": lambda m: m[0].__dict__.__setitem__("forward", lambda x: x)}
    for name, change in cases.items():
        model = build()
        change(model)
        tree = _anatomy.TreeCache()
        want = _meter.runs_compiled(model)
        assert want == (name not in ("plain", "forward plain")), name
        assert _meter.runs_compiled(model, tree.modules(model)) == want, name
        assert _meter.runs_compiled(model, tree.modules(model)) == want, name + " (cached)"


def test_in_compiled_call_sees_a_dynamo_frame_anywhere_up_the_stack(monkeypatch):
    # The callers' file names are read in C; a frame of dynamo's
    # eval_frame.py at any depth within the limit is found, none past it.
    import sys
    import types
    monkeypatch.setitem(sys.modules, "torch._dynamo.eval_frame", types.ModuleType("eval_frame"))
    path = os.path.join("/x", "torch", "_dynamo", "eval_frame.py")
    ns = {}
    exec(compile("def under(f):\n    return f()\n", path, "exec"), ns)

    def nest(n, f):
        return f() if n == 0 else nest(n - 1, f)

    here = sys._getframe
    assert not _meter.in_compiled_call(here())
    assert ns["under"](lambda: _meter.in_compiled_call(here()))
    assert ns["under"](lambda: nest(30, lambda: _meter.in_compiled_call(here())))
    assert not ns["under"](lambda: nest(30, lambda: _meter.in_compiled_call(here(), depth=20)))
    assert not _meter.in_compiled_call(None)
