"""Run one kind of the truth corpus: a real (tiny) torch model under the
real hook, ``vramscope.watch(model, optimizer)`` with default settings, on
the simulated CUDA allocator (bench/fakecuda.py's SimAllocator) whose
blocks are the sizes bench/truth/sizes.py derives for the real model the
kind describes. Writes the allocator's own ledger (its true peak per step
and phase, the memory held between steps, where it ran out of memory) as
JSON: the ground truth the scorecard judges the report against.

    python3 bench/truth/drive.py KIND --socket SOCK --truth OUT.json [--rank R]
"""

import argparse
import json
import os
import random
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "bench"), os.path.join(ROOT, "pyhook")]

import fakecuda  # noqa: E402
import kinds  # noqa: E402
import shapes  # noqa: E402
import torch  # noqa: E402

import vramscope  # noqa: E402

# How long one evaluation batch of an unwatched model (eval_model) takes: a
# GPT-2 small forward of 4 x 512 tokens is about 2 * 124M * 2048 = 0.5 TFLOP,
# 1-2 ms on an H100; 2 ms. The hook sees such an evaluation only through its
# sampler, which needs it to last; the simulated forward takes no time.
UNWATCHED_BATCH_S = 0.002


class Memory:
    """The memory of one training loop of ``kind`` (kinds.Kind) on ``sim``:
    each method is a phase's allocations, called from inside that phase."""

    def __init__(self, sim, kind, rank):
        self.sim, self.k, self.rank = sim, kind, rank
        self.rng = random.Random(kind.seed * 7 + rank)
        m = kind.model
        self.w = sim.malloc(m.weights())
        self.grads = {}  # trained share -> handle
        self.state = {}  # trained share -> Adam state handle
        # Each training forward not yet through its backward: its saved
        # activations, logits and (loss()) log-softmax, oldest first.
        self.passes = []
        # In an attack's passes, how it takes its gradient ("input":
        # torch.autograd.grad to the perturbation, which makes no parameter
        # gradients; "backward": loss.backward(), which accumulates them)
        self.attacking = None
        self.attack_eval = False
        self.retain = False  # a backward with retain_graph=True: the pass stays
        self.evaluating = False  # in the loop's evaluation (evaluate())
        self.kept, self.kept_at = [], None  # tensors kept across steps (keep())
        self.jitter = None  # the varying buffer kept across steps (held_jitter)
        self.step = 0
        if kind.resume:  # the optimizer's state loaded from a checkpoint with the weights
            self.state = {self.share(): sim.malloc(m.adam(self.share()))}

    def new_fold(self):
        """A k-fold loop's next fold: the last model, its gradients and its
        optimizer's state freed, a new model's weights made."""
        for h in [self.w] + list(self.grads.values()) + list(self.state.values()):
            self.sim.free(h)
        self.grads, self.state = {}, {}
        self.w = self.sim.malloc(self.k.model.weights())

    def shape(self):
        k = self.k
        return k.batch(self.step), k.seq(self.step)

    def share(self):
        return self.k.trained(self.step)

    def zero_grad(self, set_to_none):
        """A zero_grad of the loop's (whoever's method it is): the ledger's
        phase, and with set_to_none the gradients freed."""
        self.sim.truth_at(self.step, "zero_grad")
        if set_to_none:
            for h in self.grads.values():
                self.sim.free(h)
            self.grads = {}

    def forward(self, grad):
        k, m, sim = self.k, self.k.model, self.sim
        b, s = self.shape()
        layer = m.layer_acts(b, s, k.checkpointed)
        acts = []
        for _ in range(m.layers):
            if k.gather:  # FSDP over k.gather ranks: a layer's other shards gathered for its forward
                sim.spike(m.weights() // m.layers * (k.gather - 1))
            sim.spike(m.attn_scores(b, s))
            if grad:
                acts.append(sim.malloc(layer))
        if grad and k.compile_warmup and self.step < k.compile_warmup:
            sim.spike(k.compile_workspace)  # autotuning workspaces of torch.compile
        if grad:  # an evaluation's outputs are eval_pass()'s
            self.keep()
            self.passes.append({"acts": acts, "logits": sim.malloc(m.logits(b, s)), "lsm": None})

    def keep(self):
        """What the script keeps across steps, made in its forward: a leak
        (outputs appended to a list) from ``leak_from`` on, once a step; a
        new buffer (a CUDA graph's pool, captured in a forward) at ``buffer_at``."""
        k = self.k
        if self.step == self.kept_at:
            return
        self.kept_at = self.step
        if k.leak and k.leak_from <= self.step < k.leak_until \
                and (k.leak_rank is None or k.leak_rank == self.rank):
            self.kept.append(self.sim.malloc(k.leak))
        if k.buffer_at is not None and self.step == k.buffer_at:
            self.kept.append(self.sim.malloc(k.buffer))
        if k.held_jitter:  # a buffer kept across steps whose size varies (a metrics cache)
            self.sim.free(self.jitter)
            self.jitter = self.sim.malloc(int(k.held_jitter * self.rng.uniform(0.01, 1)))

    def level(self):
        m, (b, s) = self.k.model, self.shape()
        return m.weights() + m.layers * m.layer_acts(b, s, self.k.checkpointed)

    def loss(self):
        """The loss's log-softmax of each forward's logits that has none yet."""
        m, (b, s) = self.k.model, self.shape()
        for p in self.passes:
            if p["lsm"] is None:
                p["lsm"] = self.sim.malloc(m.logits(b, s))

    def backward(self):
        """The backward through the latest forward not yet through its own
        (autograd runs the later graph first)."""
        k, m, sim = self.k, self.k.model, self.sim
        if not self.passes:
            return
        p = self.passes[-1]
        b, s = self.shape()
        p["dlogits"] = sim.malloc(m.logits(b, s))
        amp = k.noise_bytes or k.noise * self.level()
        if amp:  # a temporary at the step's peak that varies step to step: amp ± amp
            sim.spike(int(amp * (1 + self.rng.uniform(-1, 1))))
        share = self.share()
        if self.retain:  # the graph kept for another backward: only its gradients made
            if share not in self.grads:
                self.grads[share] = sim.malloc(m.grads(share))
            for _ in p["acts"]:
                if k.checkpointed:
                    sim.spike(m.layer_acts(b, s))
            sim.free(p.pop("dlogits"))
            return
        sim.free(p.pop("logits"))
        sim.free(p.pop("lsm"))
        if share not in self.grads and self.attacking != "input":
            self.grads[share] = sim.malloc(m.grads(share))
        for h in reversed(p["acts"]):
            if k.checkpointed:
                sim.spike(m.layer_acts(b, s))  # the layer recomputed for its backward
            sim.free(h)
        self.passes.pop()
        sim.free(p["dlogits"])

    def on_backward(self):
        # an attack's backward in eval mode is part of its evaluation
        self.sim.truth_at(self.step, "eval" if self.attacking and self.attack_eval else "backward")
        self.backward()

    def unwind(self):
        """An error left the step (caught by the loop): what its phases
        held is freed as torch frees a graph nobody holds."""
        for p in self.passes:
            for h in p["acts"] + [p.get(n) for n in ("logits", "lsm", "dlogits")]:
                self.sim.free(h)
        self.passes = []

    def optimizer_step(self):
        m, sim, share = self.k.model, self.sim, self.share()
        if share not in self.state:
            for h in self.state.values():
                sim.free(h)
            self.state = {share: sim.malloc(m.adam(share))}
        sim.spike(m.foreach_temp(share))

    def muon_step(self):
        """Muon's update of the matrices (kind.optimizers "muon+adamw")."""
        m, sim = self.k.model, self.sim
        if "muon" not in self.state:
            self.state["muon"] = sim.malloc(m.muon())
        sim.spike(m.muon_temp())

    def adamw_step(self):
        """AdamW's update of the rest, beside Muon's."""
        m, sim = self.k.model, self.sim
        if "adamw" not in self.state:
            self.state["adamw"] = sim.malloc(m.adam(m.rest()))
        sim.spike(m.foreach_temp(m.rest()))

    def eval_pass(self):
        """An evaluation under no_grad that keeps its logits, then
        concatenates them; with eval_grad, gradients enabled: each batch's
        layers save what training saves, held by its output's graph."""
        m, sim = self.k.model, self.sim
        b, s = self.k.batch(0), self.k.seq(0)
        kept, graphs = [], []
        for _ in range(self.k.eval_batches):
            if self.k.eval_model:
                time.sleep(UNWATCHED_BATCH_S)
            graph = []
            for _ in range(m.layers):
                if self.k.eval_grad:
                    sim.spike(m.attn_scores(b, s))
                    graph.append(sim.malloc(m.layer_acts(b, s)))
                else:
                    # Nothing is saved under no_grad: a layer's transient is its
                    # attention scores and (an assumption, no published figure)
                    # an eighth of what training would save for it.
                    sim.spike(m.layer_acts(b, s) // 8 + m.attn_scores(b, s))
            self.eval_output(kept, b, s)
            if self.k.eval_keep:
                graphs.extend(graph)  # the output kept holds its graph
            else:
                for h in graph:
                    sim.free(h)
        self.eval_concat(kept, b, s)
        for h in graphs:
            sim.free(h)

    def eval_output(self, kept, b, s):
        """An evaluation batch's logits: kept in ``kept`` (eval_keep), else freed."""
        out = self.sim.malloc(self.k.model.logits(b, s))
        if self.k.eval_keep:
            kept.append(out)
        else:
            self.sim.free(out)

    def eval_concat(self, kept, b, s):
        """The kept logits concatenated, then all of them dropped (``kept`` emptied)."""
        if kept:
            cat = self.sim.malloc(sum(self.k.model.logits(b, s) for _ in kept))
            for h in kept:
                self.sim.free(h)
            if self.k.eval_leak:  # the predictions kept for good (a list never cleared)
                self.kept.append(cat)
            else:
                self.sim.free(cat)
            kept.clear()


SimGrad = fakecuda.on_backward(torch)  # Memory.backward inside autograd's backward


class Head(torch.nn.Linear):
    """The model's last child, whose call makes the simulated forward's
    memory, whoever calls it: the model's forward, or a loop that calls
    the children itself (``layout="children"``)."""

    def __init__(self, mem):
        super().__init__(8, 4)
        self.mem = mem

    def forward(self, x):
        out = super().forward(x)
        # an evaluation: under no_grad, or in eval mode (eval_grad)
        mem = self.mem
        # an attack's forward saves for its backward in eval mode too
        # (train_in_eval: a model trained in eval mode, its norms frozen)
        training = self.training or mem.k.train_in_eval and not mem.evaluating
        grad = torch.is_grad_enabled() and (training or mem.attacking)
        mem.sim.truth_at(mem.step, "forward" if grad and training else "eval")
        mem.forward(grad)
        if grad and mem.step in mem.k.bad_batches:  # a bad batch: a layer's shapes disagree
            raise IndexError("index out of range in self")
        return SimGrad.apply(out, mem.on_backward) if grad else out


class Net(torch.nn.Module):
    def __init__(self, mem):
        super().__init__()
        self.emb = torch.nn.Embedding(64, 8)
        self.head = Head(mem)
        self.mem = mem

    def forward(self, x=None, input_ids=None, labels=None):
        if input_ids is None:
            # float: embeddings already (an attack's perturbed input, as
            # model(X + delta) is an image attack's)
            e = x if x.is_floating_point() else self.emb(x % 64)
            return self.head(e.mean(1))
        # A transformers model given labels (layout="hf"): its loss is its
        # forward's, returned with the logits in a ModelOutput.
        logits = self.head(self.emb(input_ids % 64).mean(1))
        if not torch.is_grad_enabled():  # an evaluation: its loss too (the HF Trainer's asks)
            return shapes.ModelOutput(loss=logits.pow(2).mean(), logits=logits)
        loss = logits.pow(2).mean()
        self.mem.loss()
        return shapes.ModelOutput(loss=loss, logits=logits)


def call(kind, model, x):
    """The model's forward as the kind's loop writes it."""
    if kind.layout == "children":
        return model.head(model.emb(x % 64).mean(1))
    if kind.layout == "hf":
        return model(input_ids=x, labels=x)
    return model(x)


def loss_of(kind, mem, out):
    """The loss as the kind's loop computes it from the forward's output."""
    if kind.layout == "hf":
        return out.loss  # computed in the forward
    loss = out.pow(2).mean()
    mem.loss()
    return loss


class Adam(torch.optim.SGD):
    """SGD on the tiny model; Adam's memory on the simulated device."""

    def __init__(self, params, mem):
        super().__init__(params, lr=0.01)
        self.mem = mem

    def step(self, closure=None):
        out = super().step(closure)
        self.mem.sim.truth_at(self.mem.step, "step")
        self.mem.optimizer_step()
        return out

    def zero_grad(self, set_to_none=True):
        super().zero_grad(set_to_none=set_to_none)
        self.mem.zero_grad(set_to_none)


class SplitPart(torch.optim.SGD):
    """SGD on one part of the tiny model; ``update`` (Memory.muon_step or
    Memory.adamw_step) is that part's optimizer's memory on the simulated
    device."""

    def __init__(self, params, mem, update):
        super().__init__(params, lr=0.01)
        self.mem, self.update = mem, update

    def step(self, closure=None):
        out = super().step(closure)
        self.mem.sim.truth_at(self.mem.step, "step")
        self.update()
        return out

    def zero_grad(self, set_to_none=True):
        super().zero_grad(set_to_none=set_to_none)
        self.mem.zero_grad(set_to_none)


def optimizers_of(kind, model, mem):
    """The optimizers the kind's loop steps: Adam on the whole model, or
    Muon on its matrix (the head's weight) and AdamW on the rest."""
    if kind.optimizers == "adam":
        return [Adam(model.parameters(), mem)]
    matrix = [model.head.weight]
    rest = [p for p in model.parameters() if p is not model.head.weight]
    return [SplitPart(matrix, mem, mem.muon_step), SplitPart(rest, mem, mem.adamw_step)]


def run_lightning(kind, socket, sim, mem, model, truth):
    """The kind trained by a real Lightning ``Trainer.fit`` with the
    callback (integrations/lightning.py), the module laid out as Lightning's
    README lays it out: ``training_step`` calls the submodules and
    computes the loss; ``accumulate_grad_batches`` is the kind's micro.
    Lightning zeroes the gradients inside the step, after training_step
    (loops/optimization/automatic.py): the ledger follows wherever it
    does. With ``eval_every``, a validation every that many batches
    (``val_check_interval``: batches, not optimizer steps, so with
    accumulation it may fall between a step's micro-batches), each of its
    ``eval_batches`` batches through ``validation_step`` under Lightning's
    inference mode; with ``eval_keep`` their outputs kept on the device
    for ``on_validation_epoch_end``, which concatenates them, as the
    common metric code does. The batch size is fixed; row lengths that
    vary (``seq`` of the step, on one rank) come as batches made ahead,
    each of one length, in order (a length-bucketing loader's)."""
    import lightning as L
    from vramscope.integrations.lightning import VramscopeCallback

    b, s = mem.shape()
    kept = []  # a validation's outputs, kept on the device (eval_keep)

    class Lit(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.emb, self.head = model.emb, model.head

        def training_step(self, batch, i):
            out = self.head(self.emb(batch[0] % 64).mean(1))
            sim.truth_at(mem.step, "loss")
            if kind.first_micro_spike and i % kind.micro == 0:
                sim.spike(kind.first_micro_spike)
            loss = out.pow(2).mean()
            mem.loss()
            return loss

        def validation_step(self, batch, i):
            self.head(self.emb(batch[0] % 64).mean(1))  # the ledger's "eval"
            mem.eval_output(kept, b, s)

        def on_validation_epoch_end(self):
            mem.eval_concat(kept, b, s)

        def configure_optimizers(self):
            return Adam(self.parameters(), mem)

    class Ledger(L.Callback):
        def on_train_batch_start(self, trainer, module, batch, i):
            mem.step = i // kind.micro
            truth["inputs"][mem.step] = b * kind.seq(mem.step)

        def on_train_batch_end(self, trainer, module, outputs, batch, i):
            if (i + 1) % kind.micro == 0:
                truth["held"][mem.step] = sim.allocated

    # (on several ranks each takes its share of the batches: DistributedSampler)
    n = kind.steps * kind.micro * (kind.world or 1)
    if lengths_vary(kind) and not kind.world:
        loader = torch.utils.data.DataLoader(
            [(torch.randint(0, 64, (b, kind.seq(i // kind.micro))),) for i in range(n)], batch_size=None)
    else:
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.randint(0, 64, (b * n, s))), batch_size=b)
    evals = {}
    if kind.eval_every:
        val = torch.utils.data.TensorDataset(torch.randint(0, 64, (b * kind.eval_batches, s)))
        evals = dict(val_dataloaders=torch.utils.data.DataLoader(val, batch_size=b))
    trainer = L.Trainer(max_steps=kind.steps, accumulate_grad_batches=kind.micro,
                        accelerator="cpu", devices=kind.world or 1,
                        strategy="ddp" if kind.world else "auto",
                        logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0,
                        val_check_interval=kind.eval_every or None,
                        check_val_every_n_epoch=None if kind.eval_every else 1,
                        callbacks=[Ledger(), VramscopeCallback(socket=socket)])
    trainer.fit(Lit(), loader, **evals)


def lengths_vary(kind):
    """Whether ``kind``'s row length changes from step to step."""
    return len({kind.seq(i) for i in range(kind.steps)}) > 1


def run_hf_trainer(kind, socket, sim, mem, model, truth):
    """The kind trained by a real transformers ``Trainer`` with the callback
    (integrations/transformers.py): the model computes its loss from
    ``labels`` (``layout="hf"``'s forward), the Trainer's own loop calls it
    with keyword inputs, backward through accelerate, the update, then
    ``model.zero_grad()`` inside the step (Trainer._inner_training_loop);
    ``gradient_accumulation_steps`` is the kind's micro. The Trainer zeroes
    through the model, so the model's zero_grad frees the simulated
    gradients. The batch size is fixed; row lengths that vary (``seq`` of
    the step) come in order, each step's rows of one length (a
    length-grouped sampler's batches), through a Trainer whose sampler
    keeps the dataset's order."""
    import tempfile

    import transformers as T
    from vramscope.integrations.transformers import VramscopeCallback

    b, s = mem.shape()
    plain_zero_grad = model.zero_grad

    def zero_grad(set_to_none=True):
        plain_zero_grad(set_to_none)
        mem.zero_grad(set_to_none)

    model.zero_grad = zero_grad
    kept = []  # an evaluation's logits, gathered on the device (eval_keep)

    def after_forward(m, i, o):
        if torch.is_grad_enabled():
            sim.truth_at(mem.step, "loss")  # the loss, computed inside the forward, follows
        elif kind.eval_keep:
            kept.append(sim.malloc(kind.model.logits(b, s)))

    model.register_forward_hook(after_forward)
    unwatched = None
    if kind.eval_model == "ema":  # an unwatched copy, its weights on the device
        unwatched = Net(mem)
        sim.malloc(kind.model.weights())

    class Ledger(T.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            mem.step = state.global_step
            truth["inputs"][mem.step] = b * kind.seq(mem.step)

        def on_step_end(self, args, state, control, **kw):
            truth["held"][state.global_step - 1] = sim.allocated
            if kind.eval_model and state.global_step % kind.eval_every == 0:
                # A callback listed before the hook's evaluates an unwatched
                # copy: after the update, before the step has ended.
                with torch.no_grad():
                    unwatched(input_ids=torch.randint(0, 64, (b, s)))
                    mem.eval_pass()

        def on_evaluate(self, args, state, control, **kw):
            # the Trainer concatenated the kept logits (nested_concat), then
            # dropped them with the evaluation's outputs
            mem.eval_concat(kept, b, s)

    n = kind.steps * kind.micro * b
    data = [{"input_ids": t, "labels": t} for t in torch.randint(0, 64, (n, s))]
    trainer_class = T.Trainer
    if lengths_vary(kind):
        data = [{"input_ids": t, "labels": t} for t in (
            torch.randint(0, 64, (kind.seq(i // (kind.micro * b)),)) for i in range(n))]

        class InOrder(T.Trainer):
            def _get_train_sampler(self, train_dataset=None):
                return torch.utils.data.SequentialSampler(
                    self.train_dataset if train_dataset is None else train_dataset)
        trainer_class = InOrder
    evals = dict(eval_strategy="steps", eval_steps=kind.eval_every, per_device_eval_batch_size=b,
                 prediction_loss_only=not kind.eval_keep) if kind.eval_every and not kind.eval_model else {}
    args = T.TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="vs-truth-hf-"), per_device_train_batch_size=b,
        gradient_accumulation_steps=kind.micro, max_steps=kind.steps, use_cpu=True,
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, seed=kind.seed, **evals)
    trainer = trainer_class(model=model, args=args, train_dataset=data,
                        eval_dataset=data[:kind.eval_batches * b] if evals else None,
                        optimizers=(Adam(model.parameters(), mem), None),
                        callbacks=[Ledger(), VramscopeCallback(socket=socket)])
    trainer.train()


def run_accelerate(kind, socket, sim, mem, model, truth):
    """The kind in accelerate's loop with gradient accumulation, as its
    examples write it: ``accelerator.prepare``, then for every batch, under
    ``accelerator.accumulate(model)``, the forward, ``accelerator.backward``,
    ``optimizer.step()`` and ``optimizer.zero_grad()``, which the
    ``AcceleratedOptimizer`` passes to the real optimizer on sync steps only
    (every ``micro``-th batch); ``vramscope.watch`` is given what prepare
    returned. Fixed input sizes only."""
    from accelerate import Accelerator

    acc = Accelerator(cpu=True, gradient_accumulation_steps=kind.micro)
    model, opt = acc.prepare(model, Adam(model.parameters(), mem))
    vramscope.watch(model, opt, socket=socket)
    b, s = mem.shape()
    for i in range(kind.steps * kind.micro):
        mem.step = i // kind.micro
        truth["inputs"][mem.step] = b * s
        x = torch.randint(0, 64, (b, s))
        with acc.accumulate(model):
            out = call(kind, model, x)
            sim.truth_at(mem.step, "loss")
            acc.backward(loss_of(kind, mem, out))
            opt.step()
            opt.zero_grad()
        if (i + 1) % kind.micro == 0:
            truth["held"][mem.step] = sim.allocated


def run_gan(kind, socket, sim, mem, model, truth):
    """The kind as a GAN's loop with both models watched (DCGAN's:
    ``watch(G, opt_g, name="G")``, ``watch(D, opt_d, name="D")``), each
    iteration ``critic`` updates of D on real and detached fake samples
    (WGAN's n_critic), then G's through D on the last fakes. Each optimizer
    step is a step of the ledger (the hook's numbering, docs/hook.md
    "Several models"). Both models have the kind's model's sizes; G's
    forward is made in D's step and freed in G's backward (or dropped at
    the next D step). Fixed input sizes only."""
    mem_g = Memory(sim, kind, 1)  # (a leak_rank of 0 leaks in D alone)
    gen = Net(mem_g)
    opt_d, opt_g = Adam(model.parameters(), mem), Adam(gen.parameters(), mem_g)
    vramscope.watch(gen, opt_g, socket=socket, name="G")
    vramscope.watch(model, opt_d, socket=socket, name="D")
    b, s = mem.shape()
    turn = kind.critic + 1
    for i in range(kind.steps // turn):
        for step in range(turn * i, turn * i + turn):
            truth["inputs"][step] = b * s
        for k in range(kind.critic):  # D's updates
            mem.step = mem_g.step = turn * i + k
            opt_d.zero_grad()
            # G's samples as D's input: embeddings (b, s, 8), G's graph behind them
            fake = torch.cat([gen(torch.randint(0, 64, (b, s)))] * 2, 1)[:, None, :].expand(b, s, 8)
            real = model(torch.randint(0, 64, (b, s)))
            out = model(fake.detach())
            sim.truth_at(mem.step, "loss")
            loss = loss_of(kind, mem, real) + loss_of(kind, mem, out)
            loss.backward()
            opt_d.step()
            truth["held"][mem.step] = sim.allocated
            if k < kind.critic - 1:
                mem_g.unwind()  # that fake's graph, never trained through, dropped
        mem.step = mem_g.step = turn * i + kind.critic  # G's update, through D
        opt_g.zero_grad()
        out = model(fake)
        sim.truth_at(mem.step, "loss")
        loss_of(kind, mem, out).backward()
        opt_g.step()
        truth["held"][mem.step] = sim.allocated


def distributed(kind, socket, rank, mem):
    """A kind on ``kind.world`` gloo ranks: the process group made here (a
    file rendezvous by the socket), and the variables torchrun sets, by
    which accelerate (under the HF Trainer) and Lightning find it and wrap
    the model in DDP. DDP's ``zero_grad()`` is torch's ``Module.zero_grad`` run
    on the wrapper: here it also frees the simulated gradients, as the real
    allocator sees the real ones freed."""
    import torch.distributed as dist
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(kind.world),
                      LOCAL_WORLD_SIZE=str(kind.world), MASTER_ADDR="127.0.0.1")
    dist.init_process_group("gloo", init_method="file://" + socket + ".rdv",
                            rank=rank, world_size=kind.world)
    ddp = torch.nn.parallel.DistributedDataParallel
    plain = torch.nn.Module.zero_grad

    def zero_grad(self, set_to_none=True):
        plain(self, set_to_none)
        mem.zero_grad(set_to_none)

    ddp.zero_grad = zero_grad


def run(kind, socket, rank):
    warnings.simplefilter("ignore")
    torch.manual_seed(kind.seed)
    sim = fakecuda.SimAllocator(script=((0, 0), {})).install(torch)
    sim.limit = kind.limit
    if not kind.observer:
        del torch._C._cuda_attach_out_of_memory_observer
    mem = Memory(sim, kind, rank)
    model = Net(mem)
    framework = {"lightning": run_lightning, "hf-trainer": run_hf_trainer,
                 "accelerate": run_accelerate, "gan": run_gan}.get(kind.layout)
    if kind.world:
        distributed(kind, socket, rank, mem)
    if framework is not None:
        truth = {"steps": {}, "held": {}, "eval": {}, "oom": None, "inputs": {}}
        try:
            framework(kind, socket, sim, mem, model, truth)
        finally:
            write_truth(sim, truth)
        return
    opts = optimizers_of(kind, model, mem)
    # The module the loop calls and zeroes: the model, or (wrap="ddp") its
    # DDP wrapper, zeroed with the wrapper's zero_grad(); watch() is given
    # the model either way, and every optimizer.
    called = torch.nn.parallel.DistributedDataParallel(model) if kind.wrap == "ddp" else model
    zeroes = [called] if kind.wrap else opts
    if kind.zero_model:  # model.zero_grad(), the model's own (torch.nn.Module's)
        plain_zero_grad = model.zero_grad

        def zero_grad(set_to_none=True):
            plain_zero_grad(set_to_none)
            mem.zero_grad(set_to_none)

        model.zero_grad = zero_grad
        zeroes = [model]
    if kind.train_in_eval:
        called.eval()
    vramscope.watch(model, opts if len(opts) > 1 else opts[0], socket=socket)
    truth = {"steps": {}, "held": {}, "eval": {}, "oom": None, "inputs": {}, "failed": {},
             "failed_reason": {}}
    set_to_none = kind.set_to_none
    evaluated = model
    if kind.eval_model == "ema":  # an unwatched copy, its weights on the device
        evaluated = Net(mem)
        sim.malloc(kind.model.weights())

    def evaluate(x):
        mem.evaluating = True
        try:
            _evaluate(x)
        finally:
            mem.evaluating = False

    def _evaluate(x):
        if kind.eval_grad:  # in eval mode, gradients enabled
            evaluated.eval()
            call(kind, evaluated, x).sum().item()
            mem.eval_pass()
            evaluated.train()
            return
        with torch.no_grad():
            call(kind, evaluated, x)
            mem.eval_pass()

    on_device = None  # the batch on the device (batch_bytes)

    def passes(i, x, evaluates):
        """The step's forward and backward passes (its micro-steps); False
        where the loop skips the batch before its backward."""
        for m in range(kind.passes_at(i)):
            # forwards=2: two views of the batch through the model, one
            # loss over both (R-Drop, SimCLR, a siamese network)
            outs = [call(kind, called, x) for _ in range(kind.forwards)]
            sim.truth_at(i, "loss")
            if kind.first_micro_spike and m == 0:
                sim.spike(kind.first_micro_spike)
            loss = sum(loss_of(kind, mem, out) for out in outs)
            if i in kind.no_backward:  # "if not torch.isfinite(loss): continue"
                mem.unwind()  # the batch's graph dropped
                truth["held"][i] = sim.allocated
                return False
            if kind.backwards == 2:
                # two losses from one forward, each with its backward (the
                # first keeps the graph for the second: a multi-task loop)
                other = sum(out.abs().mean() for out in outs)
                mem.retain = True
                loss.backward(retain_graph=True)
                mem.retain = False
                other.backward()
            else:
                loss.backward()
            if evaluates and kind.eval_in_step and m == 1:
                evaluate(x)  # every so many batches: inside the step
        return True

    def attack(i, x):
        """PGD's adversarial perturbation of the batch's embeddings: ``kind.attack``
        ascent steps, the model in train mode or (attack_mode "eval") eval
        mode, each gradient taken to the perturbation (attack_grad "input")
        or by ``loss.backward()`` (the parameters' gradients accumulate
        until the loop's zero_grad)."""
        b, s = mem.shape()
        with torch.no_grad():
            e = model.emb(x % 64)
        delta = torch.zeros(b, s, 8, requires_grad=True)
        mem.attacking = kind.attack_grad
        if kind.attack_mode == "eval":
            called.eval()
            mem.attack_eval = True
        for _ in range(kind.attack):
            out = called(e + delta)
            sim.truth_at(i, "loss" if called.training else "eval")
            loss = loss_of(kind, mem, out)
            if kind.attack_grad == "input":
                g, = torch.autograd.grad(loss, [delta])
            else:
                loss.backward()
                g = delta.grad
            delta = (delta + 0.01 * g.sign()).detach().requires_grad_()
        called.train()
        mem.attacking, mem.attack_eval = None, False

    def iteration(i):
        nonlocal on_device
        mem.step = i
        b, s = mem.shape()
        truth["inputs"][i] = b * s
        x = torch.randint(0, 64, (b, s))
        if kind.batch_bytes:  # x = x_next.cuda(): the new batch, then the old one dropped
            sim.truth_at(i, "zero_grad")
            on_device, prev = sim.malloc(kind.batch_bytes), on_device
            sim.free(prev)
        if kind.user_reset:
            torch.cuda.reset_peak_memory_stats()
        if kind.attack:
            attack(i, x)
        if kind.closure:  # opt.step(closure), the closure zeroing and taking the passes
            def closure():
                for z in zeroes:
                    z.zero_grad(set_to_none=set_to_none)
                passes(i, x, False)
            opts[0].step(closure)
            truth["held"][i] = sim.allocated
            return
        if kind.zero == "before":
            for z in zeroes:
                z.zero_grad(set_to_none=set_to_none)
        evaluates = kind.eval_every and (i + 1) % kind.eval_every == 0
        if kind.around_phase:
            with vramscope.phase(kind.around_phase):
                went_on = passes(i, x, evaluates)
        else:
            went_on = passes(i, x, evaluates)
        if not went_on:
            return
        if kind.in_step_phase:
            with vramscope.phase(kind.in_step_phase):
                sim.truth_at(i, kind.in_step_phase)
                sim.spike(kind.model.clip_temp())
        if i not in kind.skipped:
            for opt in opts:
                opt.step()
                if kind.zero == "each":  # each optimizer zeroed after its own update
                    opt.zero_grad(set_to_none=set_to_none)
        if kind.zero == "after":
            for z in zeroes:
                z.zero_grad(set_to_none=set_to_none)
        truth["held"][i] = sim.allocated
        if evaluates and not kind.eval_in_step:
            evaluate(x)
        if kind.save_every and (i + 1) % kind.save_every == 0:
            with vramscope.phase("checkpoint"):
                sim.truth_at(i, "checkpoint")
                sim.spike(kind.model.weights())  # a consolidated fp32 copy of the weights
        if kind.empty_cache_every and (i + 1) % kind.empty_cache_every == 0:
            torch.cuda.empty_cache()

    if kind.first == "forward":  # print(model(x).shape) before the loop: its graph dropped
        mem.step = 0
        call(kind, called, torch.randint(0, 64, mem.shape()))
        mem.unwind()
    elif kind.first == "eval":  # the model evaluated before it trains
        mem.step = 0
        evaluate(torch.randint(0, 64, mem.shape()))
    oom = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
    folds = kind.fold_starts()
    try:
        for i in range(kind.steps):
            if i in folds:  # the next fold: a new model, optimizer and watch
                mem.new_fold()
                model = called = Net(mem)
                opts = zeroes = optimizers_of(kind, model, mem)
                vramscope.watch(model, opts if len(opts) > 1 else opts[0], socket=socket)
            if not kind.skip_failed and not kind.bad_batches:
                iteration(i)
                continue
            try:
                iteration(i)
            except IndexError:  # a bad batch, skipped: its graph dropped
                truth["failed"][i] = sim._truth_key[1]
                truth["failed_reason"][i] = "error"
                mem.unwind()
            except oom:  # "ran out of memory, skipping batch"
                truth["failed"][i] = sim._truth_key[1]
                mem.unwind()
                for z in zeroes:
                    z.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001 (written down, then raised: the run dies of it)
        key = sim._truth_key
        truth["oom"] = {"step": key[0], "phase": key[1], "error": type(exc).__name__}
        raise
    finally:
        write_truth(sim, truth)


def write_truth(sim, truth):
    """Write ``truth`` with the allocator's ledger of peaks to TRUTH."""
    for (step, phase), peak in sim.truth.items():
        if phase not in ("zero_grad", "forward", "loss", "backward", "step"):  # a user phase
            truth["eval"].setdefault(phase, {})[step] = peak
        else:
            truth["steps"].setdefault(step, {})[phase] = peak
    with open(TRUTH, "w") as f:
        json.dump(truth, f)


TRUTH = None


def main():
    global TRUTH
    ap = argparse.ArgumentParser()
    ap.add_argument("kind")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--truth", required=True)
    ap.add_argument("--rank", type=int, default=0)
    args = ap.parse_args()
    TRUTH = args.truth
    run(kinds.KINDS[args.kind], args.socket, args.rank)


if __name__ == "__main__":
    main()
