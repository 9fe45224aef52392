"""Real transformers: ``Trainer.train`` on CPU with the callback,
a tiny GPT-2 built from its config (no download, HF_HUB_OFFLINE=1), gradient
accumulation and evaluation every N steps, against a real ``vramscope
record`` and ``report --json``; the same run without the hook must give
bit-identical weights."""

import os

import pytest

import hf_fit
from frameworks import PHASES, Recording, need, phase_counts, phase_order

STEPS, ACCUMULATION, EVAL_EVERY = 4, 4, 2


def train(torch, outdir, callbacks, state=None, **args_kw):
    """hf_fit.train with this file's steps, or a skip without transformers."""
    return hf_fit.train(need("transformers"), torch, outdir, callbacks, STEPS, ACCUMULATION,
                        EVAL_EVERY, state=state, **args_kw)


def each_step(proc):
    """The recording's steps, each checked for what every run here has:
    STEPS steps, each with the five phases (and an evaluation after every
    EVAL_EVERY steps: a user phase eval of the step it follows, as a
    Lightning validation is; docs/hook.md, "An evaluation between steps"),
    ACCUMULATION forwards and backwards. Yields (step, phase counts,
    evaluated)."""
    assert proc["steps_total"] == STEPS, [phase_order(s) for s in proc["steps"]]
    for s in proc["steps"]:
        counts = phase_counts(s)
        evaluated = (s["step"] + 1) % EVAL_EVERY == 0
        assert sorted(counts) == sorted(PHASES + ["eval"] * evaluated), (s["step"], phase_order(s))
        assert counts["forward"] == counts["backward"] == ACCUMULATION, counts
        yield s, counts, evaluated


def test_hf_trainer_train_with_the_callback(torch_mod, vs_bin, workdir, recorders,  # noqa: F811
                                            capfd):
    need("transformers")
    from vramscope.integrations.transformers import VramscopeCallback

    want, plain_warnings = train(torch_mod, os.path.join(workdir, "plain"), [])
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = train(torch_mod, os.path.join(workdir, "hooked"),
                                 [VramscopeCallback(socket=rec.sock)])
    out = capfd.readouterr()
    assert got == want, "the hook changed the weights or the step count"
    assert want[1] == STEPS
    assert hooked_warnings == plain_warnings, "the hook warned"
    text = out.out + out.err
    assert "vramscope:" not in text and "Traceback" not in text, text
    # Evaluation (every EVAL_EVERY steps, under no_grad, after on_step_end)
    # opens no step: it is a user phase eval at the end of the step it
    # follows, as without the callback (below).
    for s, counts, evaluated in each_step(rec.process()):
        if evaluated:
            assert phase_order(s)[-1] == "eval", phase_order(s)
        assert counts["step"] == 1, counts
        # The Trainer's model.zero_grad() after the update stays in the step
        # but is no micro-step of its own: micro is the backward passes, as
        # under `vramscope run`.
        assert s["micro"] == ACCUMULATION, (s["step"], s["micro"], phase_order(s))


def test_hf_trainer_train_with_torch_compile(torch_mod, vs_bin, workdir, recorders,  # noqa: F811
                                             capfd):
    """TrainingArguments(torch_compile=True): the Trainer trains a
    torch.compile wrapper of the model the callback watches. The hook stays
    out of the compiled call (docs/hook.md, "Compiled models"): the same
    weights, graphs, captured calls and graph breaks (the Trainer's own) as
    without it, where its forward hooks broke the graph twice more. The
    wrapper takes the forward hooks at dynamo's first trace and its
    zero_grad() is watched: every step has the five phases; step 0's first
    forward runs on to its backward, with no loss of its own."""
    need("transformers")
    from vramscope.integrations.transformers import VramscopeCallback
    torch = torch_mod
    counters = torch._dynamo.utils.counters

    def train_counted(name, callbacks):
        torch._dynamo.reset()
        counters.clear()
        result = train(torch, os.path.join(workdir, name), callbacks, torch_compile=True)
        return result, (dict(counters["stats"]), dict(counters["graph_break"]))

    want, want_graphs = train_counted("plain", [])
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, got_graphs = train_counted("hooked", [VramscopeCallback(socket=rec.sock)])
    capfd.readouterr()
    assert got == want, "the hook changed the weights, the step count or warned"
    assert got_graphs == want_graphs, (got_graphs, want_graphs)
    for s, counts, _ in each_step(rec.process()):
        assert counts["loss"] == ACCUMULATION - (s["step"] == 0), counts
        assert s["micro"] == ACCUMULATION, (s["step"], s["micro"], phase_order(s))


@pytest.mark.parametrize("where", ["watch"])
def test_hf_trainer_train_watched_from_a_user_callback(where, torch_mod, vs_bin, workdir,
                                                       recorders):  # noqa: F811
    """The recorded crash (an earlier round's H100): a TrainerCallback calling
    vramscope.watch(model, optimizer) in on_train_begin. Without the
    callback's step ends, the Trainer's model.zero_grad() after the update is
    placed by where it is called: it ends that step."""
    transformers = need("transformers")
    import vramscope
    rec = Recording(vs_bin, workdir, recorders)
    handles = []

    class UserCallback(transformers.TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):
            handles.append(vramscope.watch(model, optimizer, socket=rec.sock))

    want, _ = train(torch_mod, os.path.join(workdir, "plain"), [])
    got, _ = train(torch_mod, os.path.join(workdir, "hooked"), [UserCallback()])
    handles[0].remove()
    assert got == want
    # Without the callback's step ends, the evaluation after every
    # EVAL_EVERY steps is a user phase eval of the step it follows too.
    assert len(list(each_step(rec.process()))) == STEPS


def test_figures_in_the_trainers_logs(torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    """VramscopeCallback(log_figures=True) adds the last step's peak, held
    memory and the need to each of the Trainer's logs: in its log history,
    and to a callback listed before it, where the Trainer lists its
    report_to integrations. The same bytes as vramscope's own report."""
    transformers = need("transformers")
    from vramscope.integrations.transformers import VramscopeCallback

    seen = []

    class Reporter(transformers.TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs))

    rec = Recording(vs_bin, workdir, recorders)
    states = []
    train(torch_mod, os.path.join(workdir, "logged"),
          [Reporter(), VramscopeCallback(socket=rec.sock, log_figures=True)], states,
          logging_strategy="steps", logging_steps=1)
    proc = rec.process()
    history = [h for h in states[0].log_history if "loss" in h]
    assert [h["step"] for h in history] == list(range(1, STEPS + 1)), states[0].log_history
    assert [{k: v for k, v in h.items() if k.startswith("vramscope/")} for h in history] == \
        [{k: v for k, v in h.items() if k.startswith("vramscope/")} for h in seen if "loss" in h]
    assert proc["memory"]["peaks"] == "exact", proc["memory"]
    need_ = 0
    for s, h in zip(proc["steps"], history):
        assert s["peak_known"] == "exact", s
        assert h["vramscope/step_peak_allocated"] == s["peak_allocated"], (h, s)
        assert h["vramscope/held_allocated"] == s["held"], (h, s)
        need_ = s["peak_allocated"] if s["step"] <= 1 else max(need_, s["peak_allocated"])
        assert h["vramscope/need_allocated"] == need_, (h, s)
        assert h["vramscope/need_exact"] == 1.0, h


@pytest.mark.parametrize("where", ["forward", "step"])
def test_auto_find_batch_size_shows_each_failed_attempt(torch_mod, vs_bin, workdir, recorders,  # noqa: F811
                                                        where):
    """``TrainingArguments(auto_find_batch_size=True)``: accelerate's
    find_executable_batch_size calls the training loop again with a smaller
    batch after an out-of-memory error (here raised above 4 samples, as
    CUDA's would be: torch.cuda.OutOfMemoryError), in the model's forward
    or in ``optimizer.step()`` (the first step's Adam state, while the
    batch's logits are alive). Each attempt is a session of the callback's
    (it watches again at on_train_begin): the failed ones a failed step
    each, whose forward is never an evaluation and whose update is never a
    finished one, the last one 16 finished steps (64 samples by 4)."""
    transformers = need("transformers")
    from vramscope.integrations.transformers import VramscopeCallback
    torch = torch_mod

    def oom():
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 4)
            self.batch = 0

        def forward(self, x=None, labels=None):
            self.batch = x.shape[0]
            if where == "forward" and self.batch > 4:
                oom()
            logits = self.lin(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class AdamW(torch.optim.AdamW):
        def step(self, closure=None):
            if where == "step" and net.batch > 4:
                oom()
            return super().step(closure)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"x": torch.randn(16, generator=g), "labels": torch.randint(0, 4, (), generator=g)}

    rec = Recording(vs_bin, workdir, recorders)
    args = transformers.TrainingArguments(
        output_dir=os.path.join(workdir, "out"), per_device_train_batch_size=16,
        auto_find_batch_size=True, num_train_epochs=1, save_strategy="no", report_to=[],
        use_cpu=True, disable_tqdm=True, logging_steps=1000)
    net = Net()
    trainer = transformers.Trainer(model=net, args=args, train_dataset=Data(),
                                   optimizers=(AdamW(net.parameters(), lr=1e-3), None),
                                   callbacks=[VramscopeCallback(socket=rec.sock)])
    trainer.train()
    assert trainer.state.global_step == 16
    # Every session said goodbye: as many goodbyes as hellos, at least two.
    rec.rec.wait_for(lambda msgs: 2 <= sum(m["type"] == "goodbye" for m in msgs)
                     == sum(m["type"] == "hello" for m in msgs), "every session's goodbye")
    sessions = rec.processes(goodbyes=2)
    *failed, last = sorted(sessions, key=lambda p: p["totals"]["steps"])
    assert failed and last["totals"] == dict(last["totals"], steps=16, failed=0)
    for p in failed:
        assert p["totals"]["steps"] == 0 and p["totals"]["failed"] == 1, p["totals"]
        # The retried loop's model.zero_grad() may come before the old
        # watch is removed: the failed step's tail, or a last step whose
        # training never began (no step: totals above).
        (step,) = [s for s in p["steps"] if s["failed"]]
        assert step["failed"] == "error" and phase_order(step)[0] == "forward", phase_order(step)
        assert where in phase_order(step), phase_order(step)
        assert all(phase_order(s) == ["zero_grad"] for s in p["steps"] if not s["failed"]), p["steps"]
        assert p["diagnosis"]["failed_steps"]["steps"] == [{"step": 0, "phase": where, "why": "error"}]
