"""The real hook driven through reproductions of real training stacks.

tests/stacks.py reproduces Lightning 2.6.6's automatic optimization, the HF
Trainer 5.17 inner loop with accelerate 1.15's AcceleratedOptimizer, and a
plain accelerate loop; the first tests check the reproductions against the
call orders observed on an H100 (testdata/h100/callorders/).
"""

import os
import sys
import types
import warnings

import pytest

from conftest import ROOT, queued
from frameworks import need_attr
import stacks
import vramscope
from vramscope import _api, _backward, _client, _patch

CALLORDERS = os.path.join(ROOT, "testdata", "h100", "callorders")


def observed(name, drop=()):
    with open(os.path.join(CALLORDERS, name)) as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    return [ln for ln in lines if not any(ln.strip().startswith(d) for d in drop)]


def watched_client(monkeypatch):
    """Make watch() use an unstarted client, so messages stay queued for the test."""
    made = []

    def start(config, model=None):
        c = _client.Client(config, start=False)
        made.append(c)
        return c

    monkeypatch.setattr(_api, "_start", start)
    return made


def phases(client, step=None):
    return [(m["name"], m["edge"], m["step"], m["micro"]) for m in queued(client)
            if m["type"] == "phase" and (step is None or m["step"] == step)]


def begins(client, step):
    return [n for n, e, s, _ in phases(client, step) if e == "begin"]


class Spy:
    """Spy wraps what callorder.py wrapped, on this torch."""

    def __init__(self, torch, monkeypatch, log):
        self.log = log
        monkeypatch.setattr(torch.Tensor, "backward", log.wrap("Tensor.backward", torch.Tensor.backward))
        monkeypatch.setattr(torch.autograd, "backward",
                            log.wrap("torch.autograd.backward", torch.autograd.backward))


# ---- the reproductions follow the observed orders -------------------------------------

class GPT2Like:
    """A tiny causal LM called like GPT2LMHeadModel: ``model(input_ids=, labels=)``
    returning a dict with ``loss`` computed inside forward."""

    @staticmethod
    def make(torch, vocab=50, width=16):
        class LM(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(vocab, width)
                self.head = torch.nn.Linear(width, vocab)

            def forward(self, input_ids=None, labels=None):
                logits = self.head(self.emb(input_ids))
                loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), labels.view(-1))
                return {"loss": loss, "logits": logits}
        return LM()

    @staticmethod
    def batches(torch, n, batch=8, length=32, vocab=50):
        out = []
        for _ in range(n):
            ids = torch.randint(0, vocab, (batch, length))
            out.append({"input_ids": ids, "labels": ids})
        return out


def test_hf_trainer_reproduction_matches_the_observed_order(torch_mod, monkeypatch):
    torch = torch_mod
    log = stacks.Log()
    Spy(torch, monkeypatch, log)
    model = GPT2Like.make(torch)
    monkeypatch.setattr(model, "forward", log.wrap("model.forward", model.forward))
    opt = torch.optim.AdamW(model.parameters())
    monkeypatch.setattr(opt, "step", log.wrap("AdamW.step", opt.step))
    spy = types.SimpleNamespace()
    stacks.hf_trainer_train(torch, model, opt, [spy], GPT2Like.batches(torch, 4), log=log)
    want = observed("hf_trainer.txt", drop=("cb.on_init_end", "cb.on_log"))
    want = [ln.split(" optimizer=")[0] for ln in want]
    assert log.lines == want


def lightning_module(torch, log=None, call_module=True):
    base = stacks.lightning_module_base(torch)

    class Mod(base):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(64, 64)

        def forward(self, x):
            if log is not None:
                log("LightningModule.forward")
            return self.net(x)

        def training_step(self, batch, idx):
            if log is not None:
                log("training_step {")
                log.depth += 1
            x = batch[0]
            out = self(x) if call_module else self.net(x)
            loss = out.square().mean()
            if log is not None:
                log.depth -= 1
                log("} training_step")
            return loss

        def validation_step(self, batch, idx):
            return self(batch[0]).square().mean()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())

    return Mod()


def test_lightning_reproduction_matches_the_observed_order(torch_mod, monkeypatch):
    torch = torch_mod
    log = stacks.Log()
    Spy(torch, monkeypatch, log)
    zero = torch.optim.Optimizer.zero_grad
    monkeypatch.setattr(torch.optim.Optimizer, "zero_grad", log.wrap("Optimizer.zero_grad", zero))
    monkeypatch.setattr(torch.optim.AdamW, "step", log.wrap("AdamW.step", torch.optim.AdamW.step))
    mod = lightning_module(torch, log)
    monkeypatch.setattr(mod.net, "forward", log.wrap("inner Linear.forward", mod.net.forward))
    trainer = stacks.LightningTrainer(torch, log=log, callbacks=[types.SimpleNamespace()])
    trainer.fit(mod, [[torch.randn(32, 64)] for _ in range(2)])
    want = observed("lightning.txt", drop=("optimizer type",))
    assert log.lines == want


def test_accelerate_reproduction_matches_the_observed_order(torch_mod, monkeypatch):
    torch = torch_mod
    log = stacks.Log()
    Spy(torch, monkeypatch, log)
    monkeypatch.setattr(torch.optim.Optimizer, "zero_grad",
                        log.wrap("Optimizer.zero_grad", torch.optim.Optimizer.zero_grad))
    monkeypatch.setattr(torch.optim.AdamW, "step", log.wrap("AdamW.step", torch.optim.AdamW.step))
    acc = stacks.Accelerator(torch)
    model = torch.nn.Linear(64, 64)
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters()))
    log("prepared optimizer: %s, inner %s, has _optimizer_step_pre_hooks: %s" % (
        type(opt).__name__, type(opt.optimizer).__name__,
        hasattr(opt, "_optimizer_step_pre_hooks")))
    for i in range(2):
        log("-- step %d" % i)
        opt.zero_grad()
        loss = model(torch.randn(8, 64)).square().mean()
        acc.backward(loss)
        opt.step()
    assert log.lines == observed("accelerate.txt")


# ---- finding 1: watch() never raises into training --------------------------------------

def test_accelerated_optimizer_is_unwrapped_and_training_runs(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    acc = stacks.Accelerator(torch)
    model = torch.nn.Linear(16, 4)
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters()))
    # torch 2.x's class has register_step_pre_hook; the instance lacks its dict.
    assert callable(getattr(opt, "register_step_pre_hook", None))
    assert not hasattr(opt, "_optimizer_step_pre_hooks")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: the wrapper is known
        handle = vramscope.watch(model, opt)
    assert handle.watcher.optimizer is opt.optimizer
    stacks.accelerate_loop(torch, model, opt, acc, steps=3)
    client = made[0]
    for step in range(3):
        assert begins(client, step) == ["zero_grad", "forward", "loss", "backward", "step"]
    handle.remove()


def test_unknown_wrapper_without_init_falls_back_to_a_wrapped_step_and_says_so_once(
        torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    hooked_base = stacks.torch2_step_hooks(torch, torch.optim.Optimizer)

    class Odd(hooked_base):  # skips Optimizer.__init__ and hides its inner optimizer
        def __init__(self, inner):
            self._inner = inner

        @property
        def param_groups(self):
            return self._inner.param_groups

        def zero_grad(self, set_to_none=True):
            self._inner.zero_grad()

        def step(self, closure=None):
            return self._inner.step(closure)

    model = torch.nn.Linear(16, 4)
    opt = Odd(torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.warns(RuntimeWarning, match="Odd has no step hooks") as got:
        h1 = vramscope.watch(model, opt)
        h2 = vramscope.watch(torch.nn.Linear(2, 2), Odd(torch.optim.SGD(
            torch.nn.Linear(2, 2).parameters(), lr=0.1)))
    assert len([w for w in got if "no step hooks" in str(w.message)]) == 1
    assert "step" in opt.__dict__ and h1.watcher.uses_step_hooks is False
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 16)).sum().backward()
        opt.step()
    assert begins(made[0], 1) == ["zero_grad", "forward", "loss", "backward", "step"]
    h1.remove()
    h2.remove()


def test_swapped_arguments_raise_value_error_naming_it_before_hooking(torch_mod):
    torch = torch_mod
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"arguments look swapped: got the optimizer SGD first "
                                         r"and Linear second; call vramscope.watch\(model, optimizer\)"):
        vramscope.watch(opt, model)
    with pytest.raises(ValueError, match="got the optimizer SGD where the model goes"):
        vramscope.watch(opt)
    with pytest.raises(ValueError, match="must be a torch.nn.Module"):
        vramscope.watch("model")
    with pytest.raises(ValueError, match="optimizer must be"):
        vramscope.watch(model, object())
    assert not model._forward_pre_hooks and "zero_grad" not in opt.__dict__
    assert _api.current_client() is None


def test_an_internal_failure_in_watch_returns_an_inert_handle(torch_mod, monkeypatch):
    torch = torch_mod
    watched_client(monkeypatch)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def broken(*a, **k):
        raise AttributeError("'X' object has no attribute '_optimizer_step_pre_hooks'")

    monkeypatch.setattr(model, "register_forward_hook", broken)
    with pytest.warns(RuntimeWarning, match="internal error"):
        handle = vramscope.watch(model, opt)
    assert not handle.active
    assert not model._forward_pre_hooks, "what was hooked before the failure is undone"
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()


# ---- finding 2: Lightning and closures ------------------------------------------------------

@pytest.mark.parametrize("layout", ["self(x)", "self.net(x)"])
@pytest.mark.parametrize("how", ["callback", "watch-in-configure_optimizers"])
def test_lightning_automatic_optimization_shows_all_five_phases(torch_mod, monkeypatch, how,
                                                                layout):
    torch = torch_mod
    made = watched_client(monkeypatch)
    # training_step calls the module, or (Lightning's README) its submodule
    mod = lightning_module(torch, call_module=layout == "self(x)")
    callbacks = []
    if how == "callback":
        from vramscope.integrations.lightning import LightningHooks
        callbacks.append(LightningHooks())
    else:
        configure = mod.configure_optimizers

        def configure_and_watch():
            opt = configure()
            vramscope.watch(mod, opt)
            return opt
        mod.configure_optimizers = configure_and_watch
    trainer = stacks.LightningTrainer(torch, callbacks=callbacks, val_every=1, sanity_val=2)
    batches = [[torch.randn(32, 64)] for _ in range(3)]
    trainer.fit(mod, batches, val_batch=[torch.randn(100, 64)])
    client = made[0]
    for step in range(3):
        # Lightning zeroes after training_step, inside the closure (lightning.txt).
        # Validation and the sanity check are evaluations: user phases "eval".
        got = begins(client, step)
        assert [n for n in got if n != "eval"] == ["forward", "loss", "zero_grad", "backward", "step"], step
        assert got.count("eval") >= 1, got  # (and the sanity check, when watched by then)
    assert {m["step"] for m in queued(client) if m["type"] == "phase"} == {0, 1, 2}, \
        "validation and sanity checks open no step"
    fwd = [m for m in queued(client) if m["type"] == "phase" and m["name"] == "forward"
           and m["edge"] == "begin"]
    assert all(m["input"]["batch"] == 32 for m in fwd), "never the validation batch of 100"
    if how == "callback":
        assert not mod._forward_pre_hooks, "on_train_end removed the hooks"
        assert not mod.net._forward_pre_hooks and not mod.net._forward_hooks
    else:
        # Still watched: the submodule keeps its hooks only where
        # training_step calls it outside the module's own forward.
        assert bool(mod.net._forward_hooks) == (layout == "self.net(x)")


def test_lightning_gradient_accumulation_is_one_step_of_two_micro_steps(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    from vramscope.integrations.lightning import LightningHooks
    trainer = stacks.LightningTrainer(torch, callbacks=[LightningHooks()], accumulate_grad_batches=2)
    trainer.fit(lightning_module(torch), [[torch.randn(32, 64)] for _ in range(4)])
    client = made[0]
    for step in range(2):
        got = [(n, mi) for n, e, s, mi in phases(client, step) if e == "begin"]
        assert got == [("forward", 0), ("loss", 0), ("zero_grad", 0), ("backward", 0),
                       ("forward", 1), ("loss", 1), ("backward", 1), ("step", 2)]
    assert client.step == 2


def test_lbfgs_closure_phases_show_as_themselves_and_step_is_the_update(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=3)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    vramscope.watch(model, opt)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(2):
        opt.step(closure)
    client = made[0]
    for step in range(2):
        got = begins(client, step)
        evals = got.count("forward")
        assert evals >= 2, "LBFGS evaluates the closure several times"
        assert got == ["zero_grad", "forward", "loss", "backward", "step"] * evals
    assert client.step == 2


# ---- HF Trainer --------------------------------------------------------------------------

def test_hf_trainer_with_the_callback_counts_optimizer_steps_and_keyword_batches(
        torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    from vramscope.integrations.transformers import TrainerHooks
    model = GPT2Like.make(torch)
    opt = torch.optim.AdamW(model.parameters())
    ev = GPT2Like.batches(torch, 1, batch=64)[0]
    stacks.hf_trainer_train(torch, model, opt, [TrainerHooks()], GPT2Like.batches(torch, 6),
                            accumulation=2, evaluate_every=1, eval_batch=ev)
    client = made[0]
    assert client.step == 3, "one step per optimizer step; evaluation opens none"
    micro = [("forward", 0), ("loss", 0), ("backward", 0), ("forward", 1), ("loss", 1),
             ("backward", 1), ("step", 2), ("zero_grad", 2)]
    for step in range(3):
        got = [(n, mi) for n, e, s, mi in phases(client, step) if e == "begin"]
        first = [("zero_grad", 0)] if step == 0 else []  # Trainer zeroes once before the loop
        # the evaluation after each step: a user phase of the step it follows
        assert got[:-1] == first + micro and got[-1][0] == "eval", (step, got)
    fwd = [m for m in queued(client) if m["type"] == "phase" and m["name"] == "forward"
           and m["edge"] == "begin"]
    if _supports_kwargs_pre_hooks(torch):
        assert all(m["input"] == {"batch": 8, "tokens": 256} for m in fwd)
    anat = [m for m in queued(client) if m["type"] == "anatomy"]
    assert [a["batch_size"] for a in anat] == [8, 8, 8], "keyword input_ids give the batch"
    assert [a["tokens"] for a in anat] == [256, 256, 256]
    assert not model._forward_pre_hooks, "on_train_end removed the hooks"


def _supports_kwargs_pre_hooks(torch):
    from vramscope import _watch
    return _watch._kwargs_pre_hooks(torch.nn.Linear(1, 1))


def test_integrations_import_without_their_frameworks_and_build_lazily(monkeypatch):
    for name in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks",
                 "pytorch_lightning", "pytorch_lightning.callbacks", "transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # import of it raises ImportError
    for mod in ("vramscope.integrations.lightning", "vramscope.integrations.transformers"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    import vramscope.integrations.lightning as vl
    import vramscope.integrations.transformers as vt
    with pytest.raises(ImportError, match="needs lightning"):
        vl.VramscopeCallback
    with pytest.raises(ImportError, match="needs transformers"):
        vt.VramscopeCallback

    # With the framework importable, the class derives from its base.
    class Callback:  # lightning.pytorch.callbacks.Callback: a plain class of no-op hooks
        def on_train_start(self, trainer, pl_module):
            pass

    class TrainerCallback:  # transformers.TrainerCallback
        def on_train_begin(self, args, state, control, **kwargs):
            pass

    fake_l = types.ModuleType("lightning.pytorch.callbacks")
    fake_l.Callback = Callback
    fake_t = types.ModuleType("transformers")
    fake_t.TrainerCallback = TrainerCallback
    monkeypatch.setitem(sys.modules, "lightning.pytorch.callbacks", fake_l)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", types.ModuleType("lightning.pytorch"))
    monkeypatch.setitem(sys.modules, "lightning", types.ModuleType("lightning"))
    monkeypatch.setitem(sys.modules, "transformers", fake_t)
    lc, tc = vl.VramscopeCallback(sample_hz=0), vt.VramscopeCallback()
    assert isinstance(lc, Callback) and isinstance(lc, vl.LightningHooks)
    assert isinstance(tc, TrainerCallback) and isinstance(tc, vt.TrainerHooks)
    assert lc._vramscope.watch_kwargs == {"sample_hz": 0}


# ---- finding 4: a second watch() replaces the first ---------------------------------------------

def test_second_watch_replaces_the_first_with_one_warning(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    first = vramscope.watch(model, opt)
    with pytest.warns(RuntimeWarning, match="already watched") as got:
        second = vramscope.watch(model, opt)  # the notebook cell, run again
    assert len(got) == 1
    assert not first.active and second.active and len(made) == 1
    assert len(model._forward_pre_hooks) == 1
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    client = made[0]
    assert client.step == 2
    for step in range(2):
        assert begins(client, step) == ["zero_grad", "forward", "loss", "backward", "step"]
    second.remove()
    assert not _backward.installed()


def test_lightning_optimizer_is_unwrapped_in_manual_optimization(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    model = torch.nn.Linear(8, 2)
    raw = torch.optim.AdamW(model.parameters())
    trainer = stacks.LightningTrainer(torch)
    lopt = stacks.LightningOptimizer(raw, trainer)  # what self.optimizers() returns
    assert isinstance(lopt, torch.optim.AdamW) and type(lopt).__name__ == "LightningAdamW"
    handle = vramscope.watch(model, lopt)
    assert handle.watcher.optimizer is raw
    lopt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()  # manual_backward calls loss.backward()
    lopt.step()
    assert begins(made[0], 0) == ["zero_grad", "forward", "loss", "backward", "step"]
    assert made[0].step == 1


def test_lightning_mixed_precision_skipped_step_still_ends_the_step(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    from vramscope.integrations.lightning import LightningHooks
    trainer = stacks.LightningTrainer(torch, callbacks=[LightningHooks()], amp_skip={1})
    trainer.fit(lightning_module(torch), [[torch.randn(32, 64)] for _ in range(3)])
    client = made[0]
    assert client.step == 3, "one step per batch, also the one whose update was skipped"
    for step in range(3):
        assert begins(client, step) == ["forward", "loss", "zero_grad", "backward", "step"]


def test_hf_trainer_with_watch_in_a_user_callback_no_longer_crashes(torch_mod, monkeypatch):
    """The recorded failure (clients.jsonl.gz, hf_trainer): a TrainerCallback
    calling vramscope.watch(model, optimizer) in on_train_begin raised
    AttributeError '_optimizer_step_pre_hooks' into the Trainer."""
    torch = torch_mod
    made = watched_client(monkeypatch)

    class UserCallback:
        def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):
            vramscope.watch(model, optimizer)

    model = GPT2Like.make(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stacks.hf_trainer_train(torch, model, torch.optim.AdamW(model.parameters()),
                                [UserCallback()], GPT2Like.batches(torch, 4), accumulation=2)
    client = made[0]
    for step in range(2):
        got = [n for n in begins(client, step) if n != "zero_grad"]
        assert got == ["forward", "loss", "backward"] * 2 + ["step"], step
    # Without the callback the step ends at the update; the Trainer's
    # model.zero_grad() after it is written after optimizer.step(), so it
    # ends that step instead of opening one more.
    assert begins(client, 2) == []
    assert client.step == 2
    assert begins(client, 1)[-1] == "zero_grad"


def test_a_watched_model_can_be_deep_copied_and_saved_whole(torch_mod, monkeypatch):
    """EMA helpers deepcopy the model; some scripts torch.save(model). Both
    used to fail on the hooks (a Watcher holds torch and a lock)."""
    import copy
    import io
    import pickle
    torch = torch_mod
    made = watched_client(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    vramscope.watch(model, opt)
    ema = copy.deepcopy(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    pickle.dumps(opt)
    n = len(queued(made[0]))
    ema.zero_grad()
    ema(torch.randn(4, 8)).sum().backward()
    assert len(queued(made[0])) == n, "the copy runs unobserved"
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    ema.zero_grad()
    assert all(p.grad is not None for p in model.parameters()), "the copy zeroes its own grads"
    buf.seek(0)
    loaded = torch.load(buf) if "weights_only" not in torch.load.__code__.co_varnames \
        else torch.load(buf, weights_only=False)
    loaded(torch.randn(2, 8))
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    assert begins(made[0], 0) == ["zero_grad", "forward", "loss", "backward", "step"]


def test_a_data_parallel_replica_runs_as_itself(torch_mod, monkeypatch):
    """DataParallel builds each replica from a copy of the module's __dict__
    (Module._replicate_for_data_parallel, called by its replicate()): none
    of the hook's instance wrappers may come along, or the replica would run
    the watched module's own forward with the module's parameters (torch
    1.13's wrapper that peeks at keyword inputs: a crash on the replicas'
    devices)."""
    torch = torch_mod
    made = watched_client(monkeypatch)

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return x * self.w

    model = Scale()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = vramscope.watch(model, opt)
    replica = model._replicate_for_data_parallel()
    replica.w = torch.full((4,), 2.0)  # as replicate() gives it its device's copy
    x = torch.ones(4)
    assert torch.equal(replica(x), x * 2)
    assert torch.equal(replica(x=x), x * 2)
    assert not [name for name, v in vars(replica).items()
                if getattr(getattr(v, "__func__", None), "_vramscope_wrapper", False)]
    n = len(queued(made[0]))
    replica(x)
    assert len(queued(made[0])) == n, "a replica runs unobserved"
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    assert begins(made[0], 0) == ["zero_grad", "forward", "loss", "backward", "step"]
    handle.remove()
    assert "_replicate_for_data_parallel" not in vars(model)


def test_a_watched_model_traces_and_scripts_once_the_watch_is_removed(torch_mod, monkeypatch):
    """torch.jit.script compiles a module's forward hooks, which the hook's
    are not written for (docs/hook.md, "Copies of a watched model"):
    torch.jit.trace works with the watch in place, with nothing of the
    hook's run inside the trace (no phase, no warning, even as an error:
    the hook's look at the input's shape made the tracer warn), and
    torch.jit.script once the watch is removed, every hook and wrapper gone."""
    torch = torch_mod
    made = watched_client(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = vramscope.watch(model, opt)
    x = torch.ones(2, 4)
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    with torch.no_grad():
        want = model(x)
    n = len(queued(made[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*is deprecated", category=FutureWarning)
        traced = torch.jit.trace(model, x)
    assert len(queued(made[0])) == n, "nothing of the hook's runs inside a trace"
    assert torch.equal(traced(x), want)
    handle.remove()
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert not [name for name, v in vars(model).items()
                if getattr(getattr(v, "__func__", None), "_vramscope_wrapper", False)]
    assert torch.equal(torch.jit.script(model)(x), want)


def test_a_watched_model_exports_as_an_unwatched_one(torch_mod, monkeypatch):
    """torch.export.export of a watched model between steps, strict (dynamo
    traces the forward hooks, where a graph break raises: the hook stays
    out, docs/hook.md, "Compiled models") and not (the hooks run in
    Python): the same exported graph as without the watch, and training
    goes on after it."""
    torch = torch_mod
    need_attr(torch, "export", "torch.export")
    made = watched_client(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.ones(2, 4)

    def exported(strict):
        torch._dynamo.reset()
        return torch.export.export(model, (x,), strict=strict).graph_module.code

    want = {strict: exported(strict) for strict in (True, False)}
    handle = vramscope.watch(model, opt)
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = {strict: exported(strict) for strict in (True, False)}
    assert got == want
    n = len(queued(made[0]))
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    assert len(queued(made[0])) > n, "the steps after the export are watched"
    handle.remove()


def test_a_deleted_model_is_not_kept_alive_by_the_watch_registry(torch_mod, monkeypatch):
    import gc
    import weakref
    torch = torch_mod
    watched_client(monkeypatch)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    vramscope.watch(model, opt)  # the handle dropped at once, as in the README
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    alive = weakref.ref(model)
    del model, opt
    gc.collect()
    assert alive() is None, "a notebook's deleted model must free its (GPU) memory"
    assert _api.watched() == []


@pytest.mark.parametrize("every", [0, 1])
@pytest.mark.parametrize("removed", [True, False])
def test_a_model_the_loop_drops_is_freed_at_once(torch_mod, monkeypatch, every, removed):
    # A model and optimizer the loop drops (the end of training, a fold, a
    # trial), its watch removed or not, its last loss still bound: torch
    # alone frees the model and its optimizer's state at once. The watch
    # held them in reference cycles (its bound methods, the patched
    # methods bound to their instances), which only the cyclic collector
    # frees; it holds them weakly now, and ends with its model.
    import gc
    import weakref
    torch = torch_mod
    watched_client(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters())
    handle = vramscope.watch(model, opt, activations_every=every)
    for _ in range(4):
        opt.zero_grad()
        loss = model(torch.randn(4, 8)).sum()
        loss.backward()
        opt.step()
    if removed:
        handle.remove()
    first = next(model.parameters())
    alive = (weakref.ref(model), weakref.ref(opt), weakref.ref(first),
             weakref.ref(first.grad), weakref.ref(opt.state[first]["exp_avg"]))
    del first
    gc.disable()
    try:
        del model, opt, loss
        assert [r() is None for r in alive] == [True] * 5, "freed by reference counts"
        assert handle.watcher is None if removed else not handle.watcher.active
    finally:
        gc.enable()


def test_each_folds_watch_frees_the_folds_before(torch_mod, monkeypatch):
    # A k-fold loop with a watch() per fold that it never removes: the
    # hooks tied each fold's model in a cycle, and the collector's next full
    # collection may be many steps away. The watch holds its model weakly:
    # each fold's goes when the loop rebinds its name, as without the hook.
    import gc
    import weakref
    torch = torch_mod
    watched_client(monkeypatch)
    folds, alive = [], []
    gc.disable()
    try:
        for _ in range(3):
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
            opt = torch.optim.Adam(model.parameters())
            vramscope.watch(model, opt)
            alive.append(sum(r() is not None for r in folds))
            for _ in range(3):
                opt.zero_grad()
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
            folds.append(weakref.ref(model))
    finally:
        gc.enable()
    assert alive == [0, 0, 0]
    assert [h.watcher.model is model for h in _api._live_handles()] == [True]


def test_each_folds_watch_is_named_apart_and_a_model_watched_again_keeps_its_name(
        torch_mod, monkeypatch):
    # A fold's watch ends when the loop lets its model go, so its name is
    # no live watch's any more: the next fold's is still named apart (its
    # steps are told from the last fold's), as auto-attach names its folds;
    # the same model watched again (a retried training function) keeps it.
    torch = torch_mod
    watched_client(monkeypatch)
    names = []
    for _ in range(3):
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        opt = torch.optim.Adam(model.parameters())
        handle = vramscope.watch(model, opt)
        names.append(handle.watcher.name)
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    handle.remove()
    names.append(vramscope.watch(model, opt).watcher.name)
    assert names == ["Sequential", "Sequential_2", "Sequential_3", "Sequential_3"]
