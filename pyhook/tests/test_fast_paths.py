"""The every-step fast paths (docs/hook.md, "Cost") change no message.

A plain step of a loop at rest takes shorter paths through the Watcher's
hooks; every loop below runs twice on the simulated H100 allocator
(bench/fakecuda.py SimAllocator), once as it is and once with the fast
paths turned off, and the two message streams must be the same but for
their times. Each loop leaves the rest state somewhere (an evaluation, a
closure, a new batch size, batch sizes that change at most steps (dynamic
batching), a step that moves, a skipped update, a raising
backward or forward, a census asked for mid-step), so the fall back to the
general paths is checked too.
"""

import os
import sys

import pytest

from conftest import make_config
from vramscope import _client, _cuda, _messages, _patch, _watch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
import fakecuda  # noqa: E402
from shapes import ModelOutput  # noqa: E402

STEPS = 14
CURRENT = []  # the watch a loop runs under


def stream(client):
    out = []
    for _, msg in client._number(len(client._queue), 0):
        for m in _messages.phase_messages(msg) if type(msg) is tuple else [dict(msg)]:
            m.pop("t", None)
            if m.get("type") == "census":  # what it finds is the whole process's, and timed
                m = {k: m.get(k) for k in ("type", "step", "reason", "request")}
            out.append(m)
    return out


def run(torch, loop, fast, steps=STEPS, leak_from=None, **cfg):
    sys.path.insert(0, os.path.dirname(__file__))
    import pinloop
    sim = fakecuda.SimAllocator(leak_from=leak_from, leak=256 << 20).install(torch)
    taken = []
    try:
        torch.manual_seed(0)
        client = _client.Client(make_config(**cfg), cuda=_cuda.CudaStats(torch, 0), start=False)
        step = [0]
        model = net_of(loop, pinloop)(sim, step)
        opt = pinloop.SimSGD(model.parameters(), sim, step)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        w.framework_steps = getattr(loop, "framework", False)
        if not fast:
            w._fast_loop = False
        for i in range(steps):
            step[0] = min(i, 3) if leak_from is None else i
            CURRENT[:] = [w]
            loop(torch, i, model, opt, sim)
            taken.append(w._fast)
        msgs = stream(client)
        w.remove()
        client.close("removed", timeout=0)
    finally:
        sim.uninstall()
    return msgs, taken


def plain(torch, i, model, opt, sim, batch=16):
    model.zero_grad()
    loss = model(torch.randn(batch, 8)).pow(2).sum()
    loss.backward()
    opt.step()


def accumulation(torch, i, model, opt, sim):
    model.zero_grad()
    for _ in range(3):
        model(torch.randn(16, 8)).pow(2).sum().backward()
    opt.step()


def zero_after(torch, i, model, opt, sim):
    model(torch.randn(16, 8)).pow(2).sum().backward()
    opt.step()
    model.zero_grad()


def evaluation(torch, i, model, opt, sim):
    plain(torch, i, model, opt, sim)
    if i % 4 == 3:
        with torch.no_grad():
            model(torch.randn(4, 8))


def eval_without_no_grad(torch, model):
    # an evaluation in eval mode that forgot no_grad, of a batch shaped as
    # the training ones (the forward's fast path reuses their size)
    model.eval()
    model(torch.randn(16, 8)).sum().item()
    model.train()


def evaluation_with_grad(torch, i, model, opt, sim):
    plain(torch, i, model, opt, sim)
    if i % 4 == 3:
        eval_without_no_grad(torch, model)


def evaluation_with_grad_zero_after(torch, i, model, opt, sim):
    zero_after(torch, i, model, opt, sim)
    if i % 4 == 3:
        eval_without_no_grad(torch, model)


def attack(torch, model, by_backward=False):
    # an adversarial attack's iteration: the model in eval mode on an input
    # that requires a gradient (a probe, never a training forward)
    model.eval()
    x = torch.randn(16, 8, requires_grad=True)
    loss = model(x).pow(2).sum()
    if by_backward:
        loss.backward()
    else:
        torch.autograd.grad(loss, x)
    model.train()


def adversarial(torch, i, model, opt, sim):
    if i % 3 == 2:
        attack(torch, model, by_backward=i % 2 == 0)
    plain(torch, i, model, opt, sim)


def adversarial_in_eval_mode(torch, i, model, opt, sim):
    # a model trained in eval mode, attacked every third step
    if i % 3 == 2:
        attack(torch, model)
    model.eval()
    plain(torch, i, model, opt, sim)


def trained_in_eval_mode(torch, i, model, opt, sim):
    # trains in eval mode from step 6 on: learned at that step's backward
    if i == 6:
        model.eval()
    zero_after(torch, i, model, opt, sim)


def batch_change(torch, i, model, opt, sim):
    plain(torch, i, model, opt, sim, batch=16 if i < 8 else 32)


def closure(torch, i, model, opt, sim):
    if i % 5 != 4:
        plain(torch, i, model, opt, sim)
        return

    def again():
        model.zero_grad()
        loss = model(torch.randn(16, 8)).pow(2).sum()
        loss.backward()
        return loss
    opt.step(again)


def metric_forward(torch, i, model, opt, sim):
    model.zero_grad()
    loss = model(torch.randn(16, 8)).pow(2).sum()
    with torch.no_grad():
        model(torch.randn(16, 8))  # a metric inside the step
    loss.backward()
    opt.step()


def skipped_update(torch, i, model, opt, sim):
    model.zero_grad()
    model(torch.randn(16, 8)).pow(2).sum().backward()
    if i % 6 != 5:  # a GradScaler that found inf gradients skips step()
        opt.step()


def skipped_backward(torch, i, model, opt, sim):
    model.zero_grad()
    loss = model(torch.randn(16, 8)).pow(2).sum()
    if i % 5 == 4:  # "if not torch.isfinite(loss): continue"
        return
    loss.backward()
    opt.step()


def raising_backward(torch, i, model, opt, sim):
    model.zero_grad()
    loss = model(torch.randn(16, 8)).pow(2).sum()
    if i % 5 == 4:
        loss.register_hook(lambda g: (_ for _ in ()).throw(RuntimeError("boom")))
        with pytest.raises(RuntimeError):
            loss.backward()
        return
    loss.backward()
    opt.step()


def raising_forward(torch, i, model, opt, sim):
    model.zero_grad()
    if i % 5 == 4:  # a forward that raises, then the step's own
        h = model.lin.register_forward_hook(
            lambda m, a, o: (_ for _ in ()).throw(RuntimeError("boom")))
        with pytest.raises(RuntimeError):
            model(torch.randn(16, 8))
        h.remove()
    loss = model(torch.randn(16, 8)).pow(2).sum()
    loss.backward()
    opt.step()


def census(torch, i, model, opt, sim):
    model.zero_grad()
    loss = model(torch.randn(16, 8)).pow(2).sum()
    if i == 6:  # asked mid-step, as the sender thread asks when the monitor does
        CURRENT[0].request_census("request", "r1")
    loss.backward()
    opt.step()


def net_of(loop, pinloop):
    """The model a loop trains: pinloop.Net, or one that takes keyword inputs
    and returns its own loss with the logits (``loop.output``: "dict", a
    ModelOutput, or "tuple", as ``return_dict=False`` gives)."""
    output = getattr(loop, "output", None)
    if output is None:
        return pinloop.Net
    if output == "training_step":
        return LitNet(pinloop)

    class LossNet(pinloop.Net):
        def forward(self, input_ids=None, labels=None):
            logits = super().forward(input_ids)
            loss = logits.pow(2).sum()
            return ModelOutput(loss=loss, logits=logits) if output == "dict" else (loss, logits)

    return LossNet


def keyword_model_output(torch, i, model, opt, sim):
    # model(**batch).loss: the HF shape, keyword inputs and a ModelOutput
    model.zero_grad()
    model(input_ids=torch.randn(16, 8), labels=True).loss.backward()
    opt.step()


keyword_model_output.output = "dict"


def tuple_output(torch, i, model, opt, sim):
    model.zero_grad()
    loss, _ = model(torch.randn(16, 8), labels=True)
    loss.backward()
    opt.step()


tuple_output.output = "tuple"


def step_none(torch, i, model, opt, sim):
    # accelerate's optimizer wrapper calls the optimizer's step(closure)
    # with closure None
    model.zero_grad()
    model(torch.randn(16, 8)).pow(2).sum().backward()
    opt.step(None)


def trainer_steps(torch, i, model, opt, sim):
    # transformers' Trainer under the callback (integrations/transformers.py):
    # the step from on_pre_optimizer_step to on_optimizer_step (accelerate's
    # wrapper calls step(None)), then model.zero_grad(), which stays in the
    # step, and on_step_end; an evaluation between steps every few (no step
    # of its own)
    w = CURRENT[0]
    model(input_ids=torch.randn(16, 8), labels=True).loss.backward()
    w.framework_phase("step")
    opt.step(None)
    w.framework_end("step")
    model.zero_grad()
    w.finish_step()
    if i % 5 == 4:
        with torch.no_grad():
            model(input_ids=torch.randn(16, 8), labels=True)


trainer_steps.output = "dict"
trainer_steps.framework = True


def trainer_accumulation_skips(torch, i, model, opt, sim):
    # The same with 2 micro-steps a step, and an update a mixed-precision
    # scaler skips (no optimizer.step(): the callbacks alone end the step)
    w = CURRENT[0]
    for _ in range(2):
        model(input_ids=torch.randn(16, 8), labels=True).loss.backward()
    w.framework_phase("step")
    if i not in (6, 9):
        opt.step()
    w.framework_end("step")
    model.zero_grad()
    w.finish_step()


trainer_accumulation_skips.output = "dict"
trainer_accumulation_skips.framework = True


def LitNet(pinloop):
    """A LightningModule's shape: a ``training_step`` that calls the
    submodules (Lightning's README layout), computes the loss itself and
    returns it; ``validation_step`` the same under no_grad."""

    class Lit(pinloop.Net):
        def __init__(self, sim, step):
            super().__init__(sim, step)
            self.head = pinloop.torch.nn.Linear(4, 4)

        def training_step(self, batch, i):
            x = batch["x"] if isinstance(batch, dict) else batch[0]
            out = self.head(self.lin(x))
            self.sim.phase(self.step[0], "forward")
            return pinloop.SimGrad.apply(out, lambda: self.sim.phase(self.step[0], "backward")) \
                .pow(2).sum()

        def validation_step(self, batch, i):
            return self.head(self.lin(batch[0])).sum()

    return Lit


def lightning_batch(torch, i, model, opt, sim, step=True, zero=True, size=16, as_dict=False):
    # One batch of Lightning's automatic optimization under the callback
    # (integrations/lightning.py), in the order of Lightning 2.6's sources:
    # on_train_batch_start; the closure (loops/optimization/automatic.py:
    # training_step, on_before_zero_grad and zero_grad on the first batch
    # of an accumulation, on_before_backward, backward, on_after_backward),
    # run by optimizer.step(closure=...) through the precision plugin,
    # which calls on_before_optimizer_step once the closure returned, or
    # called alone on a batch that accumulates; on_train_batch_end.
    w = CURRENT[0]
    batch = (torch.randn(size, 8), torch.zeros(size))
    if as_dict:  # a batch of named tensors, as a tokenizer's collator gives
        batch = {"x": batch[0], "y": batch[1]}
    w.framework_phase("forward", batch)

    def closure():
        loss = model.training_step(batch, i)
        if zero:
            w.framework_phase("zero_grad")
            opt.zero_grad()
        w.framework_phase("backward")
        loss.backward()
        w.framework_end("backward")
        return loss

    def after_closure():
        out = closure()
        w.framework_phase("step")
        return out

    if step:
        opt.step(closure=after_closure)
    else:
        closure()
    w.finish_open_step()


def lightning_watch(torch, i, model, opt, sim, size=16, validate=True):
    # The same without the callback (watch() in configure_optimizers): the
    # closure's training_step, zero_grad and backward mark the phases, and
    # the step begins when it returns; a validation every few steps
    batch = (torch.randn(size, 8), torch.zeros(size))

    def closure():
        loss = model.training_step(batch, i)
        opt.zero_grad()
        loss.backward()
        return loss

    opt.step(closure=closure)
    if validate and i % 5 == 4:
        with torch.no_grad():
            model.validation_step((torch.randn(4, 8), None), 0)


lightning_watch.output = "training_step"


def closure_keyword(torch, i, model, opt, sim):
    # step(closure=...) in a loop of one's own: zero_grad outside the
    # closure on even steps, inside it on odd ones; and zero_grad between
    # the forward and the backward in the steps between
    if i % 3 == 2:
        model.zero_grad()
        loss = model(torch.randn(16, 8)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return
    if i % 2 == 0:
        model.zero_grad()

    def again():
        if i % 2:
            model.zero_grad()
        loss = model(torch.randn(16, 8)).pow(2).sum()
        loss.backward()
        return loss
    opt.step(closure=again)


def lightning_steps(torch, i, model, opt, sim):
    # a validation every few steps, between them
    lightning_batch(torch, i, model, opt, sim)
    if i % 5 == 4:
        with torch.no_grad():
            model.validation_step((torch.randn(4, 8), None), 0)


lightning_steps.output = "training_step"


def lightning_accumulation(torch, i, model, opt, sim):
    # accumulate_grad_batches=2: the first batch zeroes and accumulates, the
    # second steps; batches of named tensors, of another size from step 7
    size = 16 if i < 7 else 32
    lightning_batch(torch, i, model, opt, sim, step=False, size=size, as_dict=True)
    lightning_batch(torch, i, model, opt, sim, zero=False, size=size, as_dict=True)


lightning_accumulation.output = "training_step"


# Batch sizes of dynamic batching (a new one at most steps, none twice the
# measured one)
DYNAMIC = (16, 12, 20, 14, 18, 13)


def dynamic_batches(torch, i, model, opt, sim):
    plain(torch, i, model, opt, sim, batch=DYNAMIC[i % len(DYNAMIC)])


def lightning_dynamic(torch, i, model, opt, sim):
    lightning_batch(torch, i, model, opt, sim, size=DYNAMIC[i % len(DYNAMIC)])


lightning_dynamic.output = "training_step"


def lightning_watch_dynamic(torch, i, model, opt, sim):
    lightning_watch(torch, i, model, opt, sim, size=DYNAMIC[i % len(DYNAMIC)], validate=False)


lightning_watch_dynamic.output = "training_step"


LOOPS = [census, plain, dynamic_batches, lightning_dynamic, lightning_watch_dynamic, accumulation, zero_after, evaluation, evaluation_with_grad,
         evaluation_with_grad_zero_after, trained_in_eval_mode, adversarial,
         adversarial_in_eval_mode, batch_change, closure, metric_forward,
         skipped_update, skipped_backward, raising_backward, raising_forward, keyword_model_output, tuple_output,
         step_none, trainer_steps, trainer_accumulation_skips, lightning_steps,
         lightning_accumulation, lightning_watch, closure_keyword]


@pytest.mark.parametrize("loop", LOOPS, ids=[f.__name__ for f in LOOPS])
def test_the_fast_paths_send_what_the_general_paths_send(torch_mod, loop):
    fast, taken = run(torch_mod, loop, True)
    slow, never = run(torch_mod, loop, False)
    assert not any(never)
    assert len(fast) == len(slow)
    for i, (a, b) in enumerate(zip(fast, slow)):
        assert a == b, (i, a, b)


def test_a_step_that_moves_reads_its_next_steps_phases_on_either_path(torch_mod):
    fast, taken = run(torch_mod, plain, True, leak_from=6)
    slow, _ = run(torch_mod, plain, False, leak_from=6)
    assert fast == slow
    assert not all(taken[5:])  # a moved step is followed by a breakdown step


@pytest.mark.parametrize("loop", [plain, accumulation, batch_change, metric_forward,
                                  lightning_steps, lightning_accumulation, lightning_watch],
                         ids=lambda f: f.__name__)
def test_measured_steps_take_the_fast_paths_and_send_the_same(torch_mod, loop):
    # every step measured (activations_every=1 makes no breakdown step),
    # the split taken on a few of them
    fast, taken = run(torch_mod, loop, True, steps=24, activations_every=1)
    slow, _ = run(torch_mod, loop, False, steps=24, activations_every=1)
    assert fast == slow
    anatomy = [m for m in fast if m["type"] == "anatomy"]
    assert [m["step"] for m in anatomy] == list(range(24))
    assert any(m["saved"] is None for m in anatomy) and all(m["activations"] for m in anatomy)
    if loop in (plain, accumulation) or loop is lightning_accumulation and step_hooks(torch_mod):
        assert all(taken[4:]), taken


@pytest.mark.parametrize("loop", [trainer_steps, trainer_accumulation_skips], ids=lambda f: f.__name__)
def test_the_trainers_zero_grad_after_the_update_reads_on_every_step(torch_mod, loop):
    """transformers' Trainer zeroes through the model after the update,
    inside the step: that zero_grad's end is the step's last read on every
    step, fast or not, so the memory held between steps is without the
    gradients it frees (docs/hook.md, "zero_grad after the update")."""
    for fast in (True, False):
        msgs, taken = run(torch_mod, loop, fast)
        for step in range(STEPS):
            ends = [m for m in msgs if m["type"] == "phase" and m["step"] == step
                    and m["edge"] == "end" and not m.get("user")]
            read = [m["name"] for m in ends if m["mem"] is not None]
            assert ends[-1]["name"] == "zero_grad" and read[-1] == "zero_grad", (fast, step, read)
        assert any(taken) == (fast and step_hooks(torch_mod))  # torch 1.13: the general paths


def test_a_plain_loop_at_rest_takes_the_fast_paths(torch_mod):
    for loop in (plain, accumulation):
        _, taken = run(torch_mod, loop, True)
        assert all(taken[4:]), (loop.__name__, taken)


def test_two_watches_send_on_the_fast_paths_what_the_general_paths_send(torch_mod):
    # Two models, each its own watch and optimizer on one client, stepped
    # in turn (a GAN's shape): the backward wrapper asks each fast watch
    # whether a backward is its own before the general paths.
    sys.path.insert(0, os.path.dirname(__file__))
    import pinloop

    def two(fast, order):
        sim = fakecuda.SimAllocator().install(torch_mod)
        try:
            client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch_mod, 0),
                                    start=False)
            step = [0]
            nets = [pinloop.Net(sim, step) for _ in range(2)]
            opts = [pinloop.SimSGD(n.parameters(), sim, step) for n in nets]
            ws = [_watch.Watcher(torch_mod, client, n, o, client.config, name=name)
                  for n, o, name in zip(nets, opts, "AB")]
            for w in ws:
                w._fast_loop = fast
            lock = ws[1]._lock = CountingLock(ws[1]._lock)
            locked = []  # the locks B's steps took
            for i in range(STEPS):
                step[0] = min(i, 3)
                for k in order(i):
                    before = lock.taken
                    plain(torch_mod, i, nets[k], opts[k], sim)
                    if k == 1:
                        locked.append(lock.taken - before)
            msgs = stream(client)
            for w in ws:
                w.remove()
            client.close("removed", timeout=0)
        finally:
            sim.uninstall()
        return msgs, locked

    for order in (lambda i: (0, 1), lambda i: (0,) if i < STEPS // 2 else (1,)):
        (fast, locked), (slow, _) = two(True, order), two(False, order)
        assert len(fast) == len(slow)
        for i, (a, b) in enumerate(zip(fast, slow)):
            assert a == b, (i, a, b)
        assert {m.get("model") for m in fast if m["type"] == "phase"} == {"A", "B"}
    # B alone at rest, A still listening: B's whole steps take the fast paths,
    # its backwards through the wrapper's fast route past A
    assert locked[-3:] == [0, 0, 0], locked


class CountingLock:
    """The Watcher's lock, counting how often it is taken: the fast paths
    take it never."""

    def __init__(self, lock):
        self._lock = lock
        self.taken = 0
        self.by = []  # the functions that took it

    def __enter__(self):
        self.taken += 1
        self.by.append(sys._getframe(1).f_code.co_name)
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)

    def acquire(self, *args, **kwargs):
        self.taken += 1
        self.by.append(sys._getframe(1).f_code.co_name)
        return self._lock.acquire(*args, **kwargs)

    def release(self):
        return self._lock.release()


def step_hooks(torch):
    """Whether this torch's optimizers take step hooks (torch >= 2.0)."""
    return _patch.has_step_hooks(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1))


def locks_by_step(torch, loop, steps):
    """Run ``loop`` for ``steps`` steps (its model, net_of; a framework's steps
    where ``loop.framework`` says) on a watch whose lock counts its takers:
    per step, the functions that took it, once a take."""
    sys.path.insert(0, os.path.dirname(__file__))
    import pinloop
    sim = fakecuda.SimAllocator().install(torch)
    try:
        client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch, 0), start=False)
        step = [0]
        model = net_of(loop, pinloop)(sim, step)
        opt = pinloop.SimSGD(model.parameters(), sim, step)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        w.framework_steps = getattr(loop, "framework", False)
        lock = w._lock = CountingLock(w._lock)
        by = []
        for i in range(steps):
            step[0] = min(i, 3)
            CURRENT[:] = [w]
            before = len(lock.by)
            loop(torch, i, model, opt, sim)
            by.append(lock.by[before:])
        w.remove()
        client.close("removed", timeout=0)
    finally:
        sim.uninstall()
    return by


@pytest.mark.parametrize("loop", [plain, accumulation, keyword_model_output, tuple_output,
                                  step_none, dynamic_batches], ids=lambda f: f.__name__)
def test_a_step_at_rest_runs_every_hook_on_its_fast_path(torch_mod, loop):
    # Every hook of a step at rest, the optimizer's step hooks on torch >=
    # 2.0 too (they get the optimizer itself as args[0]), runs without the
    # lock: the general paths all take it. So does a model called with
    # keyword inputs (where its pre hook gets them: torch >= 2.0) that
    # returns its loss in a ModelOutput or a tuple.
    if loop is keyword_model_output and not _patch.kwargs_pre_hooks(torch_mod.nn.Linear(1, 1)):
        pytest.skip("torch 1.13's pre hooks get no keyword inputs (docs/hook.md, \"Cost\")")
    if loop is step_none and not step_hooks(torch_mod):
        pytest.skip("torch 1.13's step patch takes step() without arguments alone")
    locked = [len(b) for b in locks_by_step(torch_mod, loop, 10)]
    assert locked[0] > 0 and locked[5:] == [0] * 5, locked


def test_a_watch_removed_from_another_thread_while_fast_steps_run(torch_mod):
    # The fast paths take no lock: a remove() from another thread may fall
    # between a fast path's test and its writes. Training goes on untouched,
    # the hooks go inert, nothing is reported, and the stream ends with the
    # goodbye queued after remove() (what a racing edge queued after it is
    # not sent).
    import threading
    import warnings
    torch = torch_mod
    sys.path.insert(0, os.path.dirname(__file__))
    import pinloop
    sim = fakecuda.SimAllocator().install(torch)
    try:
        torch.manual_seed(0)
        client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch, 0), start=False)
        step = [0]
        model = pinloop.Net(sim, step)
        opt = pinloop.SimSGD(model.parameters(), sim, step)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        started, fast_seen = threading.Event(), []

        def remover():
            started.wait()
            w.remove()
            client.close("removed", timeout=0)

        t = threading.Thread(target=remover)
        t.start()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(400):
                step[0] = min(i, 3)
                fast_seen.append(w._fast)
                if i == 20:
                    started.set()
                plain(torch, i, model, opt, sim)
        t.join(5)
        assert any(fast_seen[5:21]), "the steps before the remove ran fast"
        assert not w._fast and not w.active
        msgs = stream(client)
        assert msgs[-1]["type"] == "goodbye"
        assert [m["type"] for m in msgs].count("goodbye") == 1
    finally:
        sim.uninstall()


def test_a_trainer_step_at_rest_takes_no_lock(torch_mod):
    # Under transformers' Trainer the step comes from its callbacks: its
    # update (on_pre_optimizer_step, the optimizer's step hooks,
    # on_optimizer_step), the zero_grad after it and on_step_end take the
    # fast paths at rest, as the forward and the backward do.
    if not _patch.kwargs_pre_hooks(torch_mod.nn.Linear(1, 1)):
        pytest.skip("torch 1.13's pre hooks get no keyword inputs")
    by = [set(b) for b in locks_by_step(torch_mod, trainer_steps, 9)]
    # step 5 follows the evaluation after step 4, which leaves the rest state
    assert by[0] >= {"_on_forward_pre", "_on_forward", "user_backward_begin", "framework_phase",
                     "_step_pre", "_step_post", "_zero_grad", "finish_step"}, by[0]
    assert by[6:] == [set()] * 3, by


@pytest.mark.parametrize("loop", [lightning_steps, lightning_watch, lightning_dynamic,
                                  lightning_watch_dynamic], ids=lambda f: f.__name__)
def test_a_lightning_step_at_rest_takes_no_lock(torch_mod, loop):
    # Under Lightning the forward, zero_grad, backward and step come from
    # its callbacks (or, without them, from zero_grad and the backward),
    # from training_step, its submodules and the closure that
    # optimizer.step(closure=...) runs: at rest none takes the lock. torch
    # 1.13's step patch takes step(closure) on its general path.
    if not step_hooks(torch_mod):
        pytest.skip("torch 1.13 has no optimizer step hooks")
    by = [set(b) for b in locks_by_step(torch_mod, loop, 9)]
    # step 5 follows the validation after step 4, which leaves the rest state
    assert by[0] >= {"_training_step_general", "_on_sub_pre", "_on_sub", "_training_step_end",
                     "_zero_grad", "_step_pre", "_closure_done", "_step_post"}, by[0]
    validates = loop in (lightning_steps, lightning_watch)
    assert by[4] == ({"_validation_step_begin"} if validates else set()) and by[6:] == [set()] * 3, by
