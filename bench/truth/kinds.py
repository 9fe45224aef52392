"""The kinds of run in the truth corpus: what real training loops do to
memory, each with what a right diagnosis says about it (``expect``). The
figures themselves are never written here: they come from the simulated
allocator's own ledger (drive.py) and the sizes in sizes.py.

Expectations, all optional:

* ``pattern``: "steady", "warmup", "growth" or "unknown" (the report's
  pattern), or a tuple of those that are equally true (a warmup inside
  the noise reads as steady).
* ``growth_from`` and ``rate``: a leak's onset step and bytes per step
  (rate within 2 %, onset within 2 steps).
* ``growth_kind``: "leak" or "input" for growth.
* ``warmup``: how many first steps the warmup covers, where more than
  3 (autotuning over several steps): the need is read after them.
* ``need_from``: after a fall to a lower level, the newest level's first
  step at it (a change made in a step's update shows in the next step's
  peak): the need is that level's peak.
* ``level``: the steps where held memory or the steady peak rose or fell
  after a steady stretch (a level change, never a warmup or a leak).
* ``oom``: True when the run dies of an out-of-memory error (``observer``
  False: a torch without the allocator's out-of-memory observer, where the
  hook reports it from the uncaught exception).
* ``eval_need``: True when an evaluation peaks above training (the need's
  evaluation part).
* ``held_unknown``: steps whose held memory the hook cannot know (their
  end is seen only after the loop freed memory): the report must give
  none for them, never a figure.
* ``skip_period``: k when every kth step skipped its update, all run long
  (another optimizer's turn: a GAN's generator update through a watched
  critic); the report's ``skipped_steps.period``, 0 when none.

``skip_failed=True``: the loop catches an out-of-memory error and goes
on (fairseq's trainer skips the batch): it frees what the failed step
held, zeroes the gradients, empties the cache and takes the next batch.
The allocator's ledger names each failed step and its phase; such a step
never finished, and the report must say it failed and leave it out of
the steady figures (docs/hook.md, "A step that failed").

``no_backward``: the steps whose loss the loop skips (a non-finite loss:
no backward, no ``optimizer.step()``; the batch's graph dropped), in a
loop that zeroes first. Each is a step that skipped its update, as a
step of ``skipped`` (whose backward ran) is.

``schedule_only=True``: the kind's loop is one that earlier kinds run
(the same calls into the hook, on the same paths); only when its memory
moves is new (levels, warmups and leaks together). The diagnosis that
judges it is the same on every torch, so the torch 2.x suite of `make
test` leaves it to the torch 1.13 suite's corpus (the scorecard runs it on
any torch by name).

``eval_grad=True`` evaluates in eval mode with gradients enabled (a loop
that forgot ``torch.no_grad()``): each batch's graph, with the activations
it saved, lives as long as its output.

``eval_model="ema"`` evaluates an unwatched copy of the model (an EMA copy,
its weights held on the device) instead of the watched one: no forward the
hook sees, only memory used between steps, which the report calls
``between_steps`` (docs/hook.md, "Between steps"); the scorecard expects
the allocator's evaluation under that name.

``optimizers="muon+adamw"``: the model split between two optimizers
that both update it each step, Muon for the blocks' matrices and AdamW
for the rest, watched together (``watch(model, [muon, adamw])``); each
makes its state at its first update (sizes.py).

``in_step_phase=NAME``: the loop wraps the work between its backward and
its update in a user phase of that name (``with vramscope.phase("clip"):
clip_grad_norm_(...)``): the phase's read falls inside the step, between
its automatic phases, and its own peak (the norms' temporaries) is the
phase's, not the step's.

``around_phase=NAME``: the loop wraps its forward and backward passes
(all micro-steps) in a user phase of that name: the phase holds the
step's automatic phases, and its end read the step's peak.

``forwards=2``: each micro-step calls the model on two views of the
batch and computes one loss over both outputs.

``zero_model=True``: the loop zeroes through ``model.zero_grad()``, not
the optimizer's.

``attack=N``: PGD before each step: N ascent steps on the batch's
embeddings plus a perturbation (the model's input, as ``model(X + delta)``
is an image attack's), the model in train mode or (``attack_mode="eval"``)
eval mode, each gradient taken to the perturbation with
``torch.autograd.grad`` (``attack_grad="input"``) or ``loss.backward()``
("backward"). The allocator's ledger puts the attack's passes in step
i's forward, loss and backward in train mode (each is a pass of the step:
its ``micro`` counts them), and in ``eval`` in eval mode.

``backwards=2``: two losses from each forward, the first's backward
with ``retain_graph=True``. ``closure=True``: ``optimizer.step(closure)``,
the closure zeroing and taking the passes. ``micro`` may be a function of
the step (a loop of one's own only). ``first``: before the loop, a
forward whose graph is dropped ("forward") or an evaluation ("eval").

``train_in_eval=True``: the model trains in eval mode (its evaluations
too). ``bad_batches``: the steps whose forward raises an IndexError that
the loop catches and skips; the ledger names each failed step, its phase
and (``failed_reason``) "error".

``layout="gan"``: a GAN's loop with both models watched (drive.run_gan),
``critic`` updates of D for each of G; ``leak_rank=0`` leaks in D alone.

``leak_until``: the step from which the leak stops (a cache that filled).
``eval_leak=True``: each evaluation's concatenated predictions are kept
for good (appended to a list never cleared).

``folds=N``: a k-fold loop, the steps split into N folds, each with a new
model and optimizer (the last fold's freed first: its weights, gradients
and Adam state), watched by a ``watch()`` of its own on the same
connection; each fold's first update makes its Adam state again.
"""

import random

import sizes

MIB = sizes.MIB
GIB = 1 << 30


class Kind:
    """One kind of run. Every field has a default: a plain GPT-2 small
    fine-tune, batch 8 × 1024 tokens, Adam, zero_grad before the forward."""

    def __init__(self, name, steps, expect, **kw):
        self.name, self.steps, self.expect = name, steps, expect
        self.model = kw.pop("model", sizes.GPT2_SMALL)
        b, s = kw.pop("batch", 8), kw.pop("seq", 1024)
        self.batch = b if callable(b) else (lambda step, b=b: b)
        self.seq = s if callable(s) else (lambda step, s=s: s)
        t = kw.pop("trained", 1.0)
        self.trained = t if callable(t) else (lambda step, t=t: t)
        self.seed = kw.pop("seed", len(name))
        defaults = dict(noise=0.0, noise_bytes=0, zero="before", set_to_none=True, micro=1, checkpointed=False,
                        leak=0, leak_from=0, leak_rank=None, buffer_at=None, buffer=0,
                        eval_every=0, eval_batches=4, eval_keep=False, save_every=0,
                        empty_cache_every=0, user_reset=False, skipped=(), limit=None,
                        gather=0, observer=True, batch_bytes=0, layout="model", held_jitter=0, compile_warmup=0, compile_workspace=0, world=0, ranks=1,
                        wrap=None, first_micro_spike=0, eval_in_step=False, eval_model=None,
                        eval_grad=False, skip_failed=False, no_backward=(), resume=False, folds=1,
                        optimizers="adam", in_step_phase=None, around_phase=None, forwards=1, attack=0, attack_mode="train", attack_grad="input",
                        zero_model=False, backwards=1, closure=False, first=None,
                        train_in_eval=False, bad_batches=(), critic=1, eval_leak=False,
                        leak_until=1 << 62, schedule_only=False)
        for key, value in defaults.items():
            setattr(self, key, kw.pop(key, value))
        if kw:
            raise TypeError("unknown fields %s" % sorted(kw))

    def passes_at(self, step):
        """The micro-steps ``step`` runs: ``micro``, or ``micro(step)`` where
        it is a function (a loop of one's own only)."""
        return self.micro(step) if callable(self.micro) else self.micro

    def fold_starts(self):
        """The steps that begin a new fold (``folds``), the first one's left out."""
        fold = -(-self.steps // self.folds)
        return range(fold, self.steps, fold)


def _oom_limit(model, batch, seq):
    """A device limit that a step of ``batch`` × ``seq`` passes in its
    backward (weights, Adam state, activations, logits, log-softmax and half
    of the logits' gradient fit; the whole gradient does not), far above
    the steady steps' needs."""
    return (model.weights() + model.adam() + model.layers * model.layer_acts(batch, seq)
            + 2 * model.logits(batch, seq) + model.logits(batch, seq) // 2)


_OOM_LIMIT = _oom_limit(sizes.GPT2_SMALL, 12, 1024)

# Row lengths that vary step to step, each a fixed sequence (the same every
# run): a sawtooth of 256 to 1024 tokens, lengths of 256 to 1024 drawn per
# step by a multiplicative hash (which drifts slowly) and by a generator
# seeded per step (independent draws), and 512 with one step in five at 1024.
def _sawtooth(step):
    return 256 + 64 * ((step * 7919 + 13) % 13)


def _drawn(step):
    return 128 * (2 + (step * 2654435761 >> 7) % 7)


def _bimodal(step):
    return 1024 if (step * 40503 >> 5) % 5 == 0 else 512


def _random(step):
    return random.Random(step * 7 + 1).randrange(2, 9) * 128

K = [
    Kind("steady-short", 10, dict(pattern="warmup")),
    Kind("steady-long", 2000, dict(pattern="warmup"), batch=4, seq=512),
    # The first step's rise (Adam's state, 6 % of the peak) is inside ±10 %
    # noise: steady is as true as warmup there.
    Kind("noisy-10pct", 400, dict(pattern=("warmup", "steady")), noise=0.10),
    Kind("slow-leak", 300, dict(pattern="growth", growth_kind="leak", growth_from=50, rate=MIB),
         leak=MIB, leak_from=50, noise_bytes=41 * MIB),
    Kind("rank-leak", 120, dict(pattern="growth", growth_kind="leak", growth_from=40,
                                rate=16 * MIB, ranks={0: dict(pattern="warmup")}),
         leak=16 * MIB, leak_from=40, leak_rank=1, world=2, batch=4, seq=512),
    Kind("empty-cache", 200, dict(pattern="warmup"), empty_cache_every=50, batch=4, seq=512),
    Kind("curriculum", 240, dict(pattern="growth", growth_kind="input"),
         seq=lambda step: 128 + 4 * step, batch=4),
    Kind("user-peak-reset", 150, dict(pattern="warmup"), user_reset=True, batch=4, seq=512),
    Kind("unfreeze", 300, dict(pattern="warmup", level=[100]),
         trained=lambda step: 0.05 if step < 100 else 1.0, batch=4, seq=512),
    Kind("eval-keeps-logits", 400, dict(pattern="warmup", eval_need=True),
         eval_every=100, eval_batches=24, eval_keep=True, batch=4, seq=512),
    Kind("eval-small", 200, dict(pattern="warmup"), eval_every=25, eval_batches=2, batch=4, seq=512),
    # An evaluation in eval mode that forgot torch.no_grad() and keeps its
    # outputs, each with the activations its graph saved, until the
    # concatenation: far above training. Zeroed before and after the step.
    Kind("eval-without-no-grad", 200, dict(pattern="warmup", eval_need=True), eval_every=50,
         eval_batches=8, eval_keep=True, eval_grad=True, batch=4, seq=512),
    Kind("eval-without-no-grad-zero-after", 200, dict(pattern="warmup", eval_need=True),
         eval_every=50, eval_batches=8, eval_keep=True, eval_grad=True, zero="after", batch=4,
         seq=512),
    # The same two evaluations of an unwatched copy of the model (an EMA
    # copy): above training, and (16 batches, so that the sampler sees it
    # too) below it.
    Kind("eval-unwatched-model", 400, dict(pattern="warmup", eval_need=True),
         eval_every=100, eval_batches=24, eval_keep=True, eval_model="ema", batch=4, seq=512),
    Kind("eval-unwatched-small", 200, dict(pattern="warmup"), eval_every=25, eval_batches=16,
         eval_model="ema", batch=4, seq=512),
    # The first, in a loop that zeroes after the update: its zero_grad
    # reads where the step ends, before the evaluation.
    Kind("eval-unwatched-zero-after", 300, dict(pattern="warmup", eval_need=True),
         eval_every=100, eval_batches=24, eval_keep=True, eval_model="ema", zero="after",
         batch=4, seq=512),
    Kind("accum-ckpt-zero-after", 80, dict(pattern="warmup"), micro=8, checkpointed=True,
         zero="after", batch=2, seq=1024),
    Kind("zero-after-step", 150, dict(pattern="warmup"), zero="after", batch=4, seq=512),
    Kind("zero-in-place", 150, dict(pattern="warmup"), set_to_none=False, batch=4, seq=512),
    Kind("oom-ending", 401, dict(pattern="warmup", oom=True),
         batch=lambda step: 12 if step == 400 else 4, seq=1024, limit=_OOM_LIMIT),
    Kind("oom-no-observer", 60, dict(pattern="warmup", oom=True), observer=False,
         batch=lambda step: 12 if step == 59 else 4, seq=1024, limit=_OOM_LIMIT),
    Kind("batch-schedule", 400, dict(pattern="warmup", level=[200]),
         batch=lambda step: 4 if step < 200 else 8, seq=512),
    Kind("gradscaler-skips", 60, dict(pattern="warmup"), skipped=(0, 1), batch=4, seq=512),
    Kind("fsdp-gather", 120, dict(pattern="warmup"), gather=8, batch=4, seq=512),
    Kind("compile-warmup", 100, dict(pattern="warmup"), compile_warmup=3,
         compile_workspace=3 * GIB, batch=4, seq=512),
    # Autotuning that lasts longer than the first steps (a compiled model
    # recompiling as it meets new shapes, max-autotune benchmarking): the
    # warmup ends where the steps come back to the level, and the need is
    # the level's, read after it.
    Kind("compile-warmup-long", 100, dict(pattern="warmup", warmup=6), compile_warmup=6,
         compile_workspace=3 * GIB, batch=4, seq=512, schedule_only=True),
    Kind("compile-warmup-long-accum", 200, dict(pattern="warmup", warmup=20), compile_warmup=20,
         compile_workspace=2 * GIB, micro=4, batch=4, seq=512, schedule_only=True),
    Kind("compile-warmup-long-ckpt-zero-after", 200, dict(pattern="warmup", warmup=8),
         compile_warmup=8, compile_workspace=2 * GIB, checkpointed=True, zero="after",
         batch=4, seq=512, schedule_only=True),
    Kind("cuda-graph-pool", 100, dict(pattern="warmup", level=[40]), buffer_at=40,
         buffer=1536 * MIB, batch=4, seq=512),
    Kind("checkpoint-saves", 300, dict(pattern="warmup"), save_every=100, batch=4, seq=512),
    Kind("vit-noisy-5pct", 500, dict(pattern="warmup"), model=sizes.VIT_B16, batch=64, seq=197,
         noise=0.05),
    # Skips once the loop's shape is known (docs/hook.md: before it, a
    # zero_grad after a skipped update heads the next step).
    Kind("gradscaler-zero-after", 80, dict(pattern="warmup"), skipped=(5, 40), zero="after",
         batch=4, seq=512),
    # A GradScaler that skips now and then in a loop that zeroes first,
    # past the warmup, its steps read once.
    Kind("gradscaler-late-skips", 120, dict(pattern="warmup"), skipped=(50, 51, 90),
         batch=4, seq=512),
    # A WGAN watched by its critic: every third step is the generator's
    # update, run through the critic without its optimizer stepping.
    Kind("wgan-critic-watched", 90, dict(pattern="warmup", skip_period=3),
         skipped=tuple(range(2, 88, 3)), batch=4, seq=512),
    # A GradScaler's skip on a step that saves a checkpoint after it: the
    # checkpoint's phase falls inside the skipped step (no update ended it).
    Kind("gradscaler-skip-checkpoint", 120, dict(pattern="warmup"), skipped=(49, 99), save_every=50,
         batch=4, seq=512),
    # Skips on steps the loop evaluates after (every tenth): the evaluation
    # runs after the skipped step's backward, before the next zero_grad.
    Kind("gradscaler-skip-eval", 100, dict(pattern="warmup"), skipped=(49, 79), eval_every=10,
         batch=4, seq=512),
    # One's own phase around the forward and backward passes, read once a
    # step past the first steps: the backward's peak is inside the phase.
    Kind("phase-around-passes", 100, dict(pattern="warmup"), around_phase="fwd_bwd", batch=4, seq=512),
    # Gradient clipping in a user phase of its own, between the backward
    # and the update, on every step: the phase's reads fall inside steps
    # read once, after the backward's peak.
    Kind("clip-phase-in-step", 100, dict(pattern="warmup"), in_step_phase="clip", batch=4, seq=512),
    # A leak after a level change: the growth is read from where the change
    # settled (one line through both put its onset before the change and
    # doubled its rate); the change stays a level change.
    Kind("unfreeze-then-leak", 300, dict(pattern="growth", growth_kind="leak",
                                         growth_from=150, rate=4 * MIB, level=[100]),
         leak=4 * MIB, leak_from=150, trained=lambda step: 0.05 if step < 100 else 1.0, batch=4,
         seq=512, schedule_only=True),
    Kind("unfreeze-then-leak-noisy", 400, dict(pattern="growth", growth_kind="leak",
                                               growth_from=200, rate=4 * MIB, level=[100]),
         leak=4 * MIB, leak_from=200, noise=0.05, trained=lambda step: 0.05 if step < 100 else 1.0,
         batch=4, seq=512, schedule_only=True),
    Kind("unfreeze-leak-at-once", 300, dict(pattern="growth", growth_kind="leak",
                                            growth_from=101, rate=4 * MIB, level=[100]),
         leak=4 * MIB, leak_from=101, trained=lambda step: 0.05 if step < 100 else 1.0, batch=4,
         seq=512, schedule_only=True),
    Kind("batch-doubled-then-leak", 400, dict(pattern="growth", growth_kind="leak",
                                              growth_from=200, rate=2 * MIB, level=[100]),
         leak=2 * MIB, leak_from=200, batch=lambda step: 4 if step < 100 else 8, seq=512, schedule_only=True),
    Kind("cuda-graph-pool-then-leak-zero-after", 300, dict(pattern="growth", growth_kind="leak",
                                                           growth_from=120, rate=4 * MIB, level=[80]),
         leak=4 * MIB, leak_from=120, buffer_at=80, buffer=1536 * MIB, zero="after", batch=4,
         seq=512, schedule_only=True),
    Kind("leak-empty-cache-every-step", 300, dict(pattern="growth", growth_kind="leak",
                                                  growth_from=100, rate=2 * MIB),
         leak=2 * MIB, leak_from=100, empty_cache_every=1, batch=4, seq=512, schedule_only=True),
    # A long warmup's autotuning peaks above a leak's newest high: the need
    # is the highest peak so far.
    Kind("compile-warmup-long-leak", 300, dict(pattern="growth", growth_kind="leak",
                                               growth_from=50, rate=4 * MIB),
         leak=4 * MIB, leak_from=50, compile_warmup=6, compile_workspace=3 * GIB, batch=4, seq=512,
         schedule_only=True),
    Kind("compile-warmup-long-gradscaler-skips", 200, dict(pattern="warmup", warmup=6),
         compile_warmup=6, compile_workspace=3 * GIB, skipped=(0, 1), batch=4, seq=512, schedule_only=True),
    # Falls with an evaluation, with accumulation zeroing after the update,
    # and after a batch that ran out of memory (the loop skips it and goes on
    # with a smaller batch).
    Kind("freeze-with-eval", 300, dict(pattern="warmup", level=[150], need_from=151),
         trained=lambda step: 1.0 if step < 150 else 0.05, eval_every=25, eval_batches=2, batch=4,
         seq=512, schedule_only=True),
    Kind("freeze-accum-zero-after", 300, dict(pattern="warmup", level=[150], need_from=151),
         trained=lambda step: 1.0 if step < 150 else 0.05, zero="after", micro=2, batch=4, seq=512,
         schedule_only=True),
    Kind("oom-skip-then-smaller-batch", 300, dict(pattern="warmup", level=[101], need_from=101),
         limit=_OOM_LIMIT, skip_failed=True,
         batch=lambda step: 12 if step == 100 else (8 if step < 100 else 6), seed=9, schedule_only=True),
    # Levels, leaks and warmups together: two batch doublings in noise; a
    # leak under noisy accumulation that zeroes after the update, beside
    # evaluations, beside checkpoint saves, and late in a long run; a long
    # warmup before a fall; a fall beside GradScaler skips; an unfreeze
    # beside evaluations that keep their outputs.
    Kind("batch-schedule-two-levels-noisy", 600, dict(pattern="warmup", level=[200, 400]),
         batch=lambda step: 2 if step < 200 else (4 if step < 400 else 8), seq=512, noise=0.03,
         schedule_only=True),
    Kind("leak-accum-zero-after-noisy-10pct", 400, dict(pattern="growth", growth_kind="leak",
                                                        growth_from=150, rate=2 * MIB),
         leak=2 * MIB, leak_from=150, noise=0.10, zero="after", micro=2, batch=4, seq=512,
         schedule_only=True),
    Kind("leak-with-eval", 300, dict(pattern="growth", growth_kind="leak", growth_from=100, rate=4 * MIB),
         leak=4 * MIB, leak_from=100, eval_every=50, eval_batches=4, batch=4, seq=512, schedule_only=True),
    Kind("leak-with-checkpoint-saves", 300, dict(pattern="growth", growth_kind="leak",
                                                 growth_from=100, rate=4 * MIB),
         leak=4 * MIB, leak_from=100, save_every=50, batch=4, seq=512, schedule_only=True),
    Kind("late-leak-long-run", 1500, dict(pattern="growth", growth_kind="leak", growth_from=1000, rate=MIB),
         leak=MIB, leak_from=1000, batch=4, seq=512, schedule_only=True),
    Kind("compile-warmup-long-then-freeze", 300, dict(pattern="warmup", warmup=8, level=[150], need_from=151),
         compile_warmup=8, compile_workspace=3 * GIB,
         trained=lambda step: 1.0 if step < 150 else 0.05, batch=4, seq=512, schedule_only=True),
    Kind("freeze-gradscaler-skips", 300, dict(pattern="warmup", level=[100], need_from=101),
         trained=lambda step: 1.0 if step < 100 else 0.05, skipped=(100, 101), batch=4, seq=512,
         schedule_only=True),
    Kind("unfreeze-eval-keeps-outputs", 300, dict(pattern="warmup", level=[150]),
         trained=lambda step: 0.05 if step < 150 else 1.0, eval_every=25, eval_batches=2,
         eval_keep=True, batch=4, seq=512, schedule_only=True),
    # A leak in packed batches of 256 to 1024 tokens a row; falls beside an
    # epoch's smaller last batch and with two optimizers; a leak after an
    # unfreeze under accumulation that zeroes after the update; an unfreeze
    # and a freeze in noise.
    Kind("leak-packed-batches", 400, dict(pattern="growth", growth_kind="leak",
                                          growth_from=150, rate=4 * MIB),
         leak=4 * MIB, leak_from=150, seq=lambda step: 256 + 64 * ((step * 7919 + 13) % 13),
         batch=4, schedule_only=True),
    Kind("freeze-epoch-last-batch", 400, dict(pattern="warmup", level=[150], need_from=151),
         trained=lambda step: 1.0 if step < 150 else 0.05,
         batch=lambda step: 4 if step % 13 == 12 else 8, seq=512, schedule_only=True),
    Kind("freeze-muon-adamw", 300, dict(pattern="warmup", level=[150], need_from=151),
         trained=lambda step: 1.0 if step < 150 else 0.05, optimizers="muon+adamw", batch=4,
         seq=512, schedule_only=True),
    Kind("unfreeze-then-leak-accum-zero-after", 300, dict(pattern="growth", growth_kind="leak",
                                                          growth_from=100, rate=4 * MIB, level=[50]),
         leak=4 * MIB, leak_from=100, trained=lambda step: 0.05 if step < 50 else 1.0, zero="after",
         micro=4, batch=4, seq=512, schedule_only=True),
    Kind("unfreeze-then-freeze-noisy", 300,
         dict(pattern=("warmup", "steady"), level=[100, 200], need_from=201),
         trained=lambda step: 0.05 if step < 100 else (1.0 if step < 200 else 0.3), noise=0.05,
         batch=4, seq=512, schedule_only=True),
    # Lengths that vary step to step (dynamic padding): packed batches of
    # a sawtooth of lengths, lengths drawn per step, and mostly short rows
    # with a long one now and then; steady, with a level change of their
    # own (layers unfrozen or frozen, the batch doubled or halved), under
    # accumulation, with evaluations, and leaking.
    Kind("varlen-unfreeze", 300, dict(pattern="warmup", level=[150]),
         trained=lambda step: 0.05 if step < 150 else 1.0, batch=4, seq=_sawtooth, schedule_only=True),
    Kind("varlen-freeze", 300, dict(pattern="warmup", level=[150], need_from=151),
         trained=lambda step: 1.0 if step < 150 else 0.05, batch=4, seq=_sawtooth, schedule_only=True),
    Kind("varlen-eval-keeps-logits", 300, dict(pattern=("warmup", "steady"), eval_need=True),
         eval_every=50, eval_batches=16, eval_keep=True, batch=4, seq=_sawtooth, schedule_only=True),
    Kind("varlen-accum", 200, dict(pattern=("warmup", "steady")),
         micro=4, batch=2, seq=_sawtooth, schedule_only=True),
    Kind("drawn-lengths", 300, dict(pattern=("warmup", "steady")), batch=4, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-leak", 300, dict(pattern="growth", growth_kind="leak", growth_from=100, rate=4 * MIB),
         leak=4 * MIB, leak_from=100, batch=4, seq=_drawn, schedule_only=True),
    Kind("varlen-zero-in-place-after", 300, dict(pattern=("warmup", "steady")),
         zero="after", set_to_none=False, batch=4, seq=_sawtooth, schedule_only=True),
    Kind("drawn-lengths-batch-doubled", 300, dict(pattern="warmup", level=[150]),
         batch=lambda step: 4 if step < 150 else 8, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-noisy-5pct", 500, dict(pattern=("warmup", "steady")),
         noise=0.05, batch=4, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-accum-leak", 400, dict(pattern="growth", growth_kind="leak", growth_from=200, rate=2 * MIB),
         leak=2 * MIB, leak_from=200, micro=4, batch=2, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-eval-keeps-logits", 300, dict(pattern=("warmup", "steady"), eval_need=True),
         eval_every=50, eval_batches=16, eval_keep=True, batch=4, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-batch-halved", 400, dict(pattern="warmup", level=[200], need_from=200),
         batch=lambda step: 8 if step < 200 else 4, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-unfreeze-then-leak", 400, dict(pattern="growth", growth_kind="leak", growth_from=200, rate=4 * MIB, level=[100]),
         leak=4 * MIB, leak_from=200, trained=lambda step: 0.05 if step < 100 else 1.0, batch=4, seq=_drawn, schedule_only=True),
    Kind("bimodal-lengths", 400, dict(pattern=("warmup", "steady")),
         batch=4, seq=_bimodal, schedule_only=True),
    Kind("varlen-leak-zero-in-place-after", 400, dict(pattern="growth", growth_kind="leak", growth_from=150, rate=4 * MIB),
         leak=4 * MIB, leak_from=150, zero="after", set_to_none=False, batch=4, seq=_sawtooth, schedule_only=True),
    Kind("bimodal-lengths-freeze-noisy", 400, dict(pattern="warmup", level=[200], need_from=201),
         trained=lambda step: 1.0 if step < 200 else 0.05, noise=0.03, batch=4, seq=_bimodal, schedule_only=True),
    # More of them: lengths drawn independently per step (random), a
    # curriculum of growing lengths under per-step jitter (input growth, no
    # level changes), a length cap doubled, a batch ramped twice or cut,
    # gradient checkpointing, skipped updates, accumulation whose count
    # varies, a long warmup, a short run and a 1,500-step one.
    Kind("compile-warmup-long-drawn-lengths", 200, dict(pattern="warmup", warmup=6),
         compile_warmup=6, compile_workspace=3 * GIB, batch=4, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-checkpointed-leak", 300, dict(pattern="growth", growth_kind="leak", growth_from=120, rate=4 * MIB),
         checkpointed=True, leak=4 * MIB, leak_from=120, batch=4, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-eval-unfreeze", 300, dict(pattern="warmup", level=[150]),
         eval_every=25, eval_batches=2, trained=lambda step: 0.05 if step < 150 else 1.0, batch=4, seq=_drawn, schedule_only=True),
    Kind("curriculum-drawn-jitter", 300, dict(pattern="growth", growth_kind="input"),
         batch=4, seq=lambda step: 128 + 2 * step + 32 * (_drawn(step) // 128), schedule_only=True),
    Kind("varlen-gradscaler-skips", 200, dict(pattern="warmup"),
         skipped=(49, 99, 150), batch=4, seq=_sawtooth, schedule_only=True),
    Kind("drawn-lengths-seq-doubled", 300, dict(pattern="warmup", level=[150]),
         batch=4, seq=lambda step: _drawn(step) // (2 if step < 150 else 1), schedule_only=True),
    Kind("drawn-lengths-batch-ramp-twice", 500, dict(pattern="warmup", level=[200, 350]),
         batch=lambda step: 4 if step < 200 else 6 if step < 350 else 8, seq=_drawn, schedule_only=True),
    Kind("drawn-lengths-short", 80, dict(pattern=("warmup", "steady")),
         batch=4, seq=_drawn, schedule_only=True),
    Kind("bimodal-lengths-late-leak-long-run", 1500, dict(pattern="growth", growth_kind="leak", growth_from=1000, rate=MIB),
         leak=MIB, leak_from=1000, noise_bytes=41 * MIB, batch=4, seq=_bimodal, schedule_only=True),
    Kind("drawn-lengths-accum-varies", 300, dict(pattern=("warmup", "steady")),
         micro=lambda step: 2 + step % 3, batch=2, seq=_drawn, schedule_only=True),
    Kind("curriculum-bimodal-jitter", 300, dict(pattern="growth", growth_kind="input"),
         batch=4, seq=lambda step: 256 + step + (256 if _bimodal(step) > 512 else 0), schedule_only=True),
    Kind("random-lengths", 400, dict(pattern=("warmup", "steady")),
         batch=4, seq=_random, schedule_only=True),
    Kind("random-lengths-batch-doubled", 400, dict(pattern=("warmup", "steady"), level=[200]),
         batch=lambda step: 4 if step < 200 else 8, seq=_random, schedule_only=True),
    Kind("random-lengths-leak", 400, dict(pattern="growth", growth_kind="leak", growth_from=150, rate=2 * MIB),
         leak=2 * MIB, leak_from=150, batch=4, seq=_random, schedule_only=True),
    Kind("random-lengths-freeze", 400, dict(pattern=("warmup", "steady"), level=[200], need_from=201),
         trained=lambda step: 1.0 if step < 200 else 0.05, batch=4, seq=_random, schedule_only=True),
    Kind("curriculum-random-jitter", 300, dict(pattern="growth", growth_kind="input"),
         batch=4, seq=lambda step: 128 + 3 * step + _random(step) // 4, schedule_only=True),
    Kind("random-lengths-batch-cut", 400, dict(pattern=("warmup", "steady"), level=[200], need_from=200),
         batch=lambda step: 8 if step < 200 else 6, seq=_random, schedule_only=True),
    # Where runs end or skip, under lengths drawn per step: a long batch out
    # of memory and skipped, a leak until out of memory, losses not finite,
    # the cache emptied, a user's peak reset, two ranks zeroing after.
    Kind("oom-skip-long-batch-random-lengths", 200, dict(pattern=("warmup", "steady")),
         limit=_OOM_LIMIT, skip_failed=True, batch=lambda step: 12 if step in (60, 140) else 8,
         seq=lambda step: 1024 if step in (60, 140) else _random(step) // 2 + 256, seed=9,
         schedule_only=True),
    Kind("leak-until-oom-random-lengths", 400, dict(pattern="growth", growth_kind="leak",
                                                    growth_from=50, rate=16 * MIB, oom=True),
         leak=16 * MIB, leak_from=50, limit=sizes.GPT2_SMALL.weights() * 4 + 9 * GIB, batch=4,
         seq=_random, schedule_only=True),
    Kind("nan-skip-random-lengths", 200, dict(pattern=("warmup", "steady")), no_backward=(60, 140),
         batch=4, seq=_random, schedule_only=True),
    Kind("empty-cache-random-lengths", 300, dict(pattern=("warmup", "steady")), empty_cache_every=50,
         batch=4, seq=_random, schedule_only=True),
    Kind("user-peak-reset-random-lengths", 300, dict(pattern=("warmup", "steady")), user_reset=True,
         batch=4, seq=_random, schedule_only=True),
    Kind("ddp-zero-after-random-lengths", 300, dict(pattern=("warmup", "steady")), zero="after",
         batch=4, seq=_random, world=2, schedule_only=True),
    Kind("leak-zero-after-noisy", 300, dict(pattern="growth", growth_kind="leak", growth_from=120,
                                            rate=4 * MIB),
         leak=4 * MIB, leak_from=120, zero="after", noise=0.05, batch=4, seq=512),
    # Two long batches (12 × 1024 tokens, where the steady ones are 8 ×
    # 1024) run out of memory in their backward; the loop skips each and
    # goes on (fairseq's "ran out of memory, skipping batch").
    Kind("oom-skip-batch", 200, dict(pattern="warmup"), limit=_OOM_LIMIT, skip_failed=True,
         batch=lambda step: 12 if step in (60, 140) else 8, seed=9),
    # Two batches whose loss is not finite, skipped before their backward.
    Kind("nan-skip", 200, dict(pattern="warmup"), no_backward=(60, 140), batch=4, seq=512),
    Kind("oom-early", 3, dict(pattern="unknown", oom=True),
         batch=lambda step: 12 if step == 2 else 4, seq=1024, limit=_OOM_LIMIT),
    # The other way: most layers frozen mid-run (their gradients and Adam
    # state let go), the batch halved: a fall to a lower level, the need
    # the new level's peak.
    Kind("freeze", 300, dict(pattern="warmup", level=[150], need_from=151),
         trained=lambda step: 1.0 if step < 150 else 0.05, batch=4, seq=512, schedule_only=True),
    Kind("batch-halved", 300, dict(pattern="warmup", level=[150], need_from=150),
         batch=lambda step: 8 if step < 150 else 4, seq=512, schedule_only=True),
    Kind("freeze-noisy-5pct", 400, dict(pattern=("warmup", "steady"), level=[200], need_from=201), noise=0.05,
         trained=lambda step: 1.0 if step < 200 else 0.3, batch=4, seq=512, schedule_only=True),
    Kind("unfreeze-then-freeze", 400, dict(pattern="warmup", level=[100, 250], need_from=251),
         trained=lambda step: 1.0 if 100 <= step < 250 else 0.3, batch=4, seq=512, schedule_only=True),
    Kind("batch-halved-accum", 200, dict(pattern="warmup", level=[120], need_from=120), micro=4,
         batch=lambda step: 8 if step < 120 else 4, seq=512, schedule_only=True),
    Kind("unfreeze-early", 60, dict(pattern="warmup", level=[8]),
         trained=lambda step: 0.1 if step < 8 else 1.0, batch=4, seq=512),
    # A vision batch copied to the device at the top of each iteration: the
    # new batch is allocated before the old one is dropped (x = x_next.cuda()),
    # and the current one stays alive between steps.
    Kind("vit-batch-to-device", 120, dict(pattern="warmup"), model=sizes.VIT_B16, batch=64,
         seq=197, batch_bytes=64 * 3 * 224 * 224 * 4),
    Kind("accum-zero-first", 60, dict(pattern="warmup"), micro=4, batch=2, seq=1024),
    # The most common out-of-memory end: the first optimizer.step() makes
    # Adam's state and the device has no room for it.
    Kind("oom-first-step", 3, dict(pattern="unknown", oom=True), batch=1, seq=64,
         limit=sizes.GPT2_SMALL.weights() + sizes.GPT2_SMALL.grads() + sizes.GPT2_SMALL.adam() // 2),
    # The same, in a loop that skips a batch that ran out of memory: the
    # update of every step runs out of memory (Adam's state never fits), and
    # no step ever finishes.
    Kind("oom-step-every", 20, dict(pattern="unknown"), batch=1, seq=64, skip_failed=True,
         limit=sizes.GPT2_SMALL.weights() + sizes.GPT2_SMALL.grads() + sizes.GPT2_SMALL.adam() // 2),
    # A run resumed from a checkpoint: Adam's state is loaded onto the device
    # with the weights, before the first step.
    Kind("resume", 120, dict(pattern="steady"), resume=True, batch=4, seq=512),
    Kind("kfold", 150, dict(pattern="warmup"), folds=3, batch=4, seq=512),  # plain loop: no wrap, no eval
    # A GradScaler's skips in the k-fold loop: the second fold's first
    # update (a new model's first step) and one later in that fold.
    Kind("kfold-skips", 150, dict(pattern="warmup"), folds=3, skipped=(50, 75), batch=4, seq=512),
    # Skips at each fold's last step: the next fold's watch() is the first
    # the hook sees of that step's end, after the loop freed the fold's
    # memory, so the step's peak is known and its held memory is not.
    Kind("kfold-last-skips", 150, dict(pattern="warmup", held_unknown=[49, 99]), folds=3,
         skipped=(49, 99), batch=4, seq=512),
    # An epoch of 100 samples in batches of 8 without drop_last: every 13th
    # batch holds the 4 left over.
    Kind("epoch-tail-batch", 260, dict(pattern=("warmup", "steady")),
         batch=lambda step: 4 if step % 13 == 12 else 8, seq=512),
    Kind("unfreeze-noisy-10pct", 400, dict(pattern=("warmup", "steady"), level=[150]), noise=0.10,
         trained=lambda step: 0.05 if step < 150 else 1.0, batch=4, seq=512),
    Kind("batch-schedule-noisy", 600, dict(pattern="warmup", level=[300]), noise=0.05,
         batch=lambda step: 4 if step < 300 else 6, seq=512),
    Kind("leak-from-start", 200, dict(pattern="growth", growth_kind="leak", growth_from=0,
                                      rate=8 * MIB),
         leak=8 * MIB, leak_from=0, batch=4, seq=512),
    # Packed batches of varying length: 256 to 1024 tokens a row, drawn per
    # step (a fixed sequence, the same every run).
    Kind("variable-length", 300, dict(pattern=("warmup", "steady")), batch=4,
         seq=lambda step: 256 + 64 * ((step * 7919 + 13) % 13)),
    Kind("zero-in-place-after", 120, dict(pattern="warmup"), zero="after", set_to_none=False,
         batch=4, seq=512),
    Kind("batch-ramp-twice", 500, dict(pattern="warmup", level=[200, 350]),
         batch=lambda step: 4 if step < 200 else 6 if step < 350 else 8, seq=512),
    Kind("held-jitter", 300, dict(pattern=("warmup", "steady")), held_jitter=64 * MIB,
         noise=0.03, batch=4, seq=512),
    Kind("held-jitter-leak", 300, dict(pattern="growth", growth_kind="leak", growth_from=100,
                                       rate=2 * MIB),
         held_jitter=64 * MIB, leak=2 * MIB, leak_from=100, batch=4, seq=512),
    # A loop that calls the model's children, never the model (model.emb,
    # then model.head): docs/hook.md, "Loop shapes".
    Kind("children-calls", 120, dict(pattern="warmup"), layout="children", eval_every=40,
         eval_batches=2, batch=4, seq=512),
    Kind("gpt2-medium-ckpt", 40, dict(pattern="warmup"), model=sizes.GPT2_MEDIUM,
         checkpointed=True, batch=8, seq=1024),
    # A transformers model in a loop of one's own: model(input_ids=x,
    # labels=x).loss, the loss computed inside the forward and returned in a
    # ModelOutput, with an evaluation every 40 steps; and with accumulation.
    Kind("hf-model-own-loop", 120, dict(pattern="warmup"), layout="hf", eval_every=40,
         eval_batches=2, batch=4, seq=512),
    Kind("hf-model-accum", 60, dict(pattern="warmup"), layout="hf", micro=4, batch=2, seq=1024),
    # One's own loop with accumulation that evaluates every so many
    # batches, not steps: every tenth step's evaluation comes after its
    # second micro-batch, before the update; each step's first micro-batch
    # holds a temporary of 2 GiB more (a longer first sequence), so the
    # step peaks before the evaluation inside it.
    Kind("own-loop-eval-in-step", 60, dict(pattern="warmup", eval_need=True), micro=4,
         eval_every=10, eval_batches=8, eval_keep=True, eval_in_step=True, batch=2, seq=1024,
         first_micro_spike=2 * GIB),
    # Lightning's Trainer with the callback, the README's module layout:
    # the gradients are zeroed after training_step, so the last step's
    # live through the forward; and with accumulate_grad_batches.
    Kind("lightning-readme", 80, dict(pattern="warmup"), layout="lightning", batch=4, seq=512),
    Kind("lightning-accum", 40, dict(pattern="warmup"), layout="lightning", micro=4, batch=2,
         seq=1024),
    # The same with a validation_step whose outputs are kept for
    # on_validation_epoch_end (it peaks above training): every 20 batches;
    # and with accumulate_grad_batches=4 every 10 batches, after a step's
    # second micro-batch (steps 2, 7, 12, ...) or after its update (steps
    # 4, 9, ...). There each step's first micro-batch holds a temporary of
    # 1 GiB more (a longer first sequence): the step peaks before the
    # validation inside it.
    Kind("lightning-val", 60, dict(pattern="warmup", eval_need=True), layout="lightning",
         eval_every=20, eval_batches=8, eval_keep=True, batch=4, seq=512),
    Kind("lightning-val-accum", 40, dict(pattern="warmup", eval_need=True), layout="lightning",
         micro=4, eval_every=10, eval_batches=8, eval_keep=True, batch=2, seq=1024,
         first_micro_spike=GIB),
    # transformers' Trainer with the callback: the model computes its loss
    # (model(**batch).loss), and the Trainer zeroes the gradients through
    # the model after the update, inside the step (model.zero_grad());
    # and with gradient_accumulation_steps.
    Kind("hf-trainer", 80, dict(pattern="warmup"), layout="hf-trainer", batch=4, seq=512),
    Kind("hf-trainer-accum", 40, dict(pattern="warmup"), layout="hf-trainer", micro=4, batch=2,
         seq=1024),
    # The Trainer's evaluation every 20 steps gathers every batch's logits on
    # the device (prediction_loss_only=False, as with compute_metrics), then
    # concatenates them: it peaks above training.
    # A TrainerCallback listed before the hook's that evaluates an EMA copy
    # at on_step_end: after the update, before the hook's callback ends the step.
    Kind("hf-trainer-callback-eval", 60, dict(pattern="warmup", eval_need=True),
         layout="hf-trainer", eval_every=20, eval_batches=24, eval_keep=True, eval_model="ema",
         batch=4, seq=512),
    Kind("hf-trainer-eval", 60, dict(pattern="warmup", eval_need=True), layout="hf-trainer",
         eval_every=20, eval_batches=8, eval_keep=True, batch=4, seq=512),
    # Two views of each batch through the model and one loss over both
    # (R-Drop, SimCLR, a siamese network): both forwards' activations live
    # until the backward; and with accumulation.
    Kind("two-views", 100, dict(pattern="warmup"), forwards=2, batch=4, seq=512),
    Kind("two-views-accum", 60, dict(pattern="warmup"), forwards=2, micro=4, batch=2, seq=1024),
    # One's own loop zeroing through the model (model.zero_grad()), first
    # and after the update.
    Kind("model-zero-grad", 100, dict(pattern="warmup"), zero_model=True, batch=4, seq=512),
    Kind("model-zero-grad-after", 100, dict(pattern="warmup"), zero_model=True, zero="after",
         batch=4, seq=512),
    # Adversarial training: PGD's three ascent steps on the batch's
    # embeddings before each update. In train mode, the gradient to the
    # perturbation taken with torch.autograd.grad (zeroed first, and after
    # the update) or with loss.backward(), which leaves the parameters'
    # gradients to the loop's zero_grad: the attack's passes are the
    # step's. In eval mode, with either: an evaluation before the step.
    Kind("pgd-train", 60, dict(pattern="warmup"), attack=3, batch=4, seq=512),
    Kind("pgd-train-zero-after", 60, dict(pattern="warmup"), attack=3, zero="after", batch=4,
         seq=512),
    Kind("pgd-train-backward", 60, dict(pattern="warmup"), attack=3, attack_grad="backward",
         batch=4, seq=512),
    Kind("pgd-eval", 60, dict(pattern="warmup"), attack=3, attack_mode="eval", batch=4, seq=512),
    Kind("pgd-eval-backward", 60, dict(pattern="warmup"), attack=3, attack_mode="eval",
         attack_grad="backward", batch=4, seq=512),
    # Two losses from one forward, each with its backward, the first
    # keeping the graph (retain_graph=True) for the second: a multi-task loop.
    Kind("two-backwards", 100, dict(pattern="warmup"), backwards=2, batch=4, seq=512),
    # optimizer.step(closure), the closure zeroing and taking the passes
    # (LBFGS's interface), with four micro-steps in it.
    Kind("closure-step", 60, dict(pattern="warmup"), closure=True, micro=4, batch=2, seq=1024),
    # Accumulation to a token budget: 2 to 4 micro-batches a step.
    Kind("accum-token-budget", 80, dict(pattern="warmup"), micro=lambda step: 2 + step % 3,
         batch=2, seq=1024),
    # A forward before the loop, its output's shape printed and its graph
    # dropped; an evaluation of the model before it trains; and an
    # evaluation after every update (the training batch's
    # accuracy under no_grad).
    Kind("forward-before-loop", 80, dict(pattern="warmup"), first="forward", batch=4, seq=512),
    Kind("eval-before-loop", 80, dict(pattern="warmup"), first="eval", eval_batches=2, batch=4,
         seq=512),
    Kind("eval-every-step", 80, dict(pattern="warmup"), eval_every=1, eval_batches=1, batch=4,
         seq=512),
    # A model trained in eval mode (its norms frozen: a detector's
    # fine-tune), evaluated under no_grad every 25 steps.
    Kind("train-in-eval-mode", 100, dict(pattern="warmup"), train_in_eval=True, eval_every=25,
         eval_batches=2, batch=4, seq=512),
    # Bad batches whose forward raises (an index out of range in the
    # embedding) and that the loop skips: failed steps of an "error"; at
    # steps 30 and 60, and in a loop that zeroes after the update, at step 1.
    Kind("bad-batch", 100, dict(pattern="warmup"), bad_batches=(30, 60), batch=4, seq=512),
    Kind("bad-batch-early-zero-after", 100, dict(pattern="warmup"), bad_batches=(1, 30),
         zero="after", batch=4, seq=512),
    # A GAN with both models watched (watch(G, opt_g, name="G"), watch(D,
    # opt_d, name="D")): D's update, then G's, whose peaks differ; a WGAN's
    # five updates of D a turn; and a leak in D from step 100 (its held
    # memory grows; G's steps hold the leak too).
    Kind("gan-both-watched", 120, dict(pattern="warmup"), layout="gan", batch=4, seq=512),
    Kind("wgan-both-watched", 180, dict(pattern="warmup"), layout="gan", critic=5, batch=4,
         seq=512),
    Kind("gan-leak", 300, dict(pattern="growth", growth_kind="leak", growth_from=100,
                               rate=4 * MIB),
         layout="gan", leak=4 * MIB, leak_from=100, leak_rank=0, batch=4, seq=512),
    # An evaluation every 20 steps whose concatenated predictions are
    # appended to a list never cleared: held memory rises in stairs, each
    # flat until the next evaluation, a leak of a stair's bytes over 20
    # steps; with packed batches of 256 to 1024 tokens a row (the
    # evaluation's are step 0's, 256); and every 50 steps in a loop that
    # zeroes after the update, with noise.
    Kind("eval-keeps-predictions", 400, dict(pattern="growth", growth_kind="leak", growth_from=20,
                                             rate=4 * sizes.GPT2_SMALL.logits(4, 512) // 20),
         eval_every=20, eval_batches=4, eval_keep=True, eval_leak=True, batch=4, seq=512),
    Kind("eval-keeps-predictions-varlen", 400,
         dict(pattern="growth", growth_kind="leak", growth_from=20,
              rate=4 * sizes.GPT2_SMALL.logits(4, 256) // 20),
         eval_every=20, eval_batches=4, eval_keep=True, eval_leak=True, batch=4,
         seq=lambda step: 256 + 64 * ((step * 7919 + 13) % 13)),
    Kind("eval-keeps-predictions-noisy", 400,
         dict(pattern="growth", growth_kind="leak", growth_from=50,
              rate=8 * sizes.GPT2_SMALL.logits(4, 512) // 50),
         eval_every=50, eval_batches=8, eval_keep=True, eval_leak=True, zero="after", noise=0.05,
         batch=4, seq=512),
    # Leaks that end the run out of memory: 16 MiB a step from step 50,
    # until the device's limit (a process's share of it) is passed in a
    # step; and the evaluation that keeps its predictions, whose seventh
    # gathering no longer fits, after step 139's update.
    Kind("leak-until-oom", 400, dict(pattern="growth", growth_kind="leak", growth_from=50,
                                     rate=16 * MIB, oom=True),
         leak=16 * MIB, leak_from=50, limit=sizes.GPT2_SMALL.weights() * 4 + 6 * GIB, batch=4,
         seq=512),
    Kind("eval-keeps-predictions-oom", 400,
         dict(pattern="growth", growth_kind="leak", growth_from=20,
              rate=4 * sizes.GPT2_SMALL.logits(4, 512) // 20, oom=True),
         eval_every=20, eval_batches=4, eval_keep=True, eval_leak=True,
         limit=sizes.GPT2_SMALL.weights() * 4 + 12 * GIB, batch=4, seq=512),
    # Memory kept across steps for 100 steps, 8 MiB each, then no more (a
    # cache that fills): one level change from step 50, not a leak, not
    # twenty changes of a few MiB.
    Kind("cache-fills-then-stops", 400, dict(pattern="warmup", level=[50]), leak=8 * MIB,
         leak_from=50, leak_until=150, batch=4, seq=512),
    # accelerate's own loop with gradient accumulation: step() and
    # zero_grad() after every batch, passed on to the optimizer on sync
    # steps only.
    # One's own loop on two gloo ranks through DDP, zeroed with the
    # wrapper's zero_grad() (watch() given the model): first, and after
    # the update.
    # Muon for the matrices and AdamW for the rest, zeroed and stepped one
    # after the other; zeroed before the forward, after the update, and
    # each right after its own step ("for opt in opts: opt.step();
    # opt.zero_grad()", zero="each").
    Kind("muon-adamw", 120, dict(pattern="warmup"), optimizers="muon+adamw", batch=4, seq=512),
    Kind("muon-adamw-zero-after", 120, dict(pattern="warmup"), optimizers="muon+adamw",
         zero="after", batch=4, seq=512),
    Kind("muon-adamw-zero-each", 120, dict(pattern="warmup"), optimizers="muon+adamw",
         zero="each", batch=4, seq=512),
    Kind("ddp-zero-first", 40, dict(pattern="warmup"), world=2, wrap="ddp", batch=4, seq=512),
    Kind("ddp-zero-after", 40, dict(pattern="warmup"), world=2, wrap="ddp", zero="after",
         batch=4, seq=512),
    # The Trainer on two gloo ranks: accelerate wraps the model in DDP and
    # the Trainer zeroes through the wrapper after each update.
    # Row lengths that vary step to step through the real Trainers (batches
    # of one length each, in order, as a length-grouped sampler makes them):
    # keyword inputs of a new shape at every step.
    Kind("hf-trainer-varlen", 200, dict(pattern=("warmup", "steady")), layout="hf-trainer",
         batch=4, seq=_random),
    Kind("hf-trainer-varlen-leak", 200, dict(pattern="growth", growth_kind="leak", growth_from=80,
                                             rate=4 * MIB),
         leak=4 * MIB, leak_from=80, layout="hf-trainer", batch=4, seq=_drawn),
    Kind("hf-trainer-varlen-accum", 120, dict(pattern=("warmup", "steady")), layout="hf-trainer",
         micro=4, batch=2, seq=_sawtooth),
    Kind("hf-trainer-varlen-eval", 160, dict(pattern=("warmup", "steady")), layout="hf-trainer",
         eval_every=40, eval_batches=8, eval_keep=True, batch=4, seq=_random),
    Kind("lightning-varlen", 200, dict(pattern=("warmup", "steady")), layout="lightning", batch=4,
         seq=_random),
    Kind("hf-trainer-ddp", 40, dict(pattern="warmup"), layout="hf-trainer", world=2, batch=4,
         seq=512),
    # Lightning's DDP strategy: it calls the wrapped model with the
    # LightningModule's forward pointed at training_step.
    Kind("lightning-ddp", 40, dict(pattern="warmup"), layout="lightning", world=2, batch=4,
         seq=512),
    Kind("accelerate-accum", 60, dict(pattern="warmup"), layout="accelerate", micro=4, batch=2,
         seq=1024),
]

# What a kind's loop needs beyond torch, by layout: the scorecard leaves
# out a kind whose package is not installed (torch 1.13 has no Lightning).
NEEDS = {"lightning": "lightning", "hf-trainer": "transformers", "accelerate": "accelerate"}


def available(kind):
    """Whether the packages ``kind``'s loop needs are installed."""
    import importlib.util
    need = NEEDS.get(kind.layout)
    return need is None or importlib.util.find_spec(need) is not None

KINDS = {k.name: k for k in K}
