"""Saved activations by module, the loss's own saved tensors, and the blocks'
inputs a checkpoint would keep (docs/anatomy.md, "By module"). Every size is
computed by hand from the ops' documented saved tensors."""

import json
import os
import warnings

import pytest

from conftest import ROOT, make_config, queued
from vramscope import _client, _modules, _watch

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


def checkpointed_mlp(torch, layers, d, use_checkpoint):
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
                x = cp.checkpoint(b, x, use_reentrant=True) if use_checkpoint else b(x)
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
    if not hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks"):
        pytest.skip("this torch cannot say which saved-tensor hooks are in force")
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
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None
    assert [m["saved"]["loss"] for m in queued(client) if m["type"] == "anatomy"] == [None] * 2
    # unknown, not zero


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
