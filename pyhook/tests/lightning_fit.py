"""The Lightning fit of the real-framework tests (test_fw_lightning.py,
and each rank of test_fw_distributed.py's Lightning DDP): a small
LightningModule whose ``training_step`` reaches its model in one of the
ways real code does, trained by a real ``Trainer`` on CPU."""

import hashlib
import logging
import time

import vramscope

BATCHES = 6
PAUSE = 0.04  # seconds, of the slow submodule and the slow loss


def quiet_logs():
    """Keep Lightning's info lines quiet: they go to a handler bound to the
    stderr of whoever imported it first (in pytest, a capture closed later
    on). Whichever of lightning.pytorch and lightning.fabric was imported
    last logs the other's rank-zero lines."""
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)


def weights_hash(module):
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(repr(p.detach().float().flatten().tolist()).encode())
    return h.hexdigest()[:16]


class Layouts:
    """The ways a LightningModule's training_step reaches its model, each
    written as real code writes it. ``net(x)`` gives the logits; the loss is
    computed by ``training_step`` unless the layout computes it itself."""

    @staticmethod
    def self_call(m, torch, x, y):
        # training_step calls the module itself: self(x) -> forward -> self.net
        return torch.nn.functional.cross_entropy(m(x), y)

    @staticmethod
    def submodules(m, torch, x, y):
        # Lightning's README: training_step calls the submodules, never self(x)
        z = m.encoder(x)
        return torch.nn.functional.cross_entropy(m.decoder(z), y)

    @staticmethod
    def loss_module(m, torch, x, y):
        return m.criterion(m.decoder(m.encoder(x)), y)

    @staticmethod
    def labels(m, torch, x, y):
        # the model computes its own loss from labels, as HF models do
        return m.with_loss(x, labels=y)

    @staticmethod
    def slow_loss(m, torch, x, y):
        # submodules, then a loss that takes PAUSE to compute, then a metric
        # module updated on what needs no gradient (as torchmetrics' are)
        logits = m.decoder(m.encoder(x))
        time.sleep(PAUSE)
        loss = torch.nn.functional.cross_entropy(logits, y)
        m.accuracy(logits.detach(), y)
        return loss

    @staticmethod
    def functional(m, torch, x, y):
        # no module called: the weights used directly
        h = torch.relu(torch.nn.functional.linear(x, m.encoder[0].weight, m.encoder[0].bias))
        logits = torch.nn.functional.linear(h, m.decoder.weight, m.decoder.bias)
        return torch.nn.functional.cross_entropy(logits, y)


def make_module(L, torch, manual, watch_sock, layout="self_call", slow=False):
    compute = getattr(Layouts, layout)

    class SlowLinear(torch.nn.Linear):
        def forward(self, x):
            time.sleep(PAUSE)
            return super().forward(x)

    class WithLoss(torch.nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder

        def forward(self, x, labels=None):
            logits = self.decoder(self.encoder(x))
            if labels is None:
                return logits
            return torch.nn.functional.cross_entropy(logits, labels)

    class Accuracy(torch.nn.Module):
        def forward(self, logits, y):
            return (logits.argmax(1) == y).float().mean()

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
            self.decoder = (SlowLinear if slow else torch.nn.Linear)(32, 4)
            self.criterion = torch.nn.CrossEntropyLoss()
            self.accuracy = Accuracy()
            if layout == "labels":
                self.with_loss = WithLoss(self.encoder, self.decoder)
            self.automatic_optimization = not manual
            self.handle = None

        def forward(self, x):
            return self.decoder(self.encoder(x))

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = compute(self, torch, x, y)
            self.log("train_loss", loss)  # as Lightning's README does
            if manual:
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(loss)
                opt.step()
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            return compute(self, torch, x, y)

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
            if watch_sock is not None:
                self.handle = vramscope.watch(self, opt, socket=watch_sock)
            return opt

    return Tiny()


def fit(L, torch, mode, hook, sock=None, layout="self_call", slow=False, callback_kw=None,
        callback=None, batches=BATCHES, extra_callbacks=(), compiled=False, **trainer_kw):
    """Train one epoch of ``batches`` batches of 8 (each rank its share
    under a distributed strategy) and validate on 2, from seed 0; return
    the weights' hash and the optimizer steps. ``hook``: None, "callback"
    (VramscopeCallback) or "watch" (watch() in configure_optimizers);
    ``compiled``: fit ``torch.compile(module)``, as Lightning's docs do."""
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8 * batches, 16),
                                          torch.randint(0, 4, (8 * batches,)))
    train = torch.utils.data.DataLoader(data, batch_size=8)
    val = torch.utils.data.DataLoader(data, batch_size=8)
    module = make_module(L, torch, manual=(mode == "manual"),
                         watch_sock=sock if hook == "watch" else None, layout=layout,
                         slow=slow)
    callbacks = []
    if hook == "callback":
        if callback is None:
            from vramscope.integrations.lightning import VramscopeCallback
            callback = VramscopeCallback(socket=sock, **(callback_kw or {}))
        callbacks.append(callback)
    callbacks += list(extra_callbacks)
    trainer_kw.setdefault("logger", False)
    trainer_kw.setdefault("devices", 1)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu",
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks,
                        limit_val_batches=2, num_sanity_val_steps=1, **trainer_kw)
    trainer.fit(torch.compile(module) if compiled else module, train, val)
    if module.handle is not None:
        module.handle.remove()
    return weights_hash(module), trainer.global_step


CASES = {
    "automatic": ("automatic", {}),
    "manual": ("manual", {}),
    "accumulation": ("automatic", {"accumulate_grad_batches": 3}),
    "validation": ("automatic", {"val_check_interval": 2}),
    "bf16-mixed": ("automatic", {"precision": "bf16-mixed"}),
}


# Lightning's own order within a step (loops/optimization/automatic.py; in
# manual optimization the training_step below calls them in the same order):
# training_step, zero_grad on the first micro-batch, backward, then step.
LIGHTNING_ORDER = ["forward", "loss", "zero_grad", "backward", "step"]


def step_phases(step, hook, layout, validated, sanity_seen=False):
    """The phases of ``step`` in a recording of :func:`fit`, in order, and
    how many ``zero_grad`` edges it has: ``validated``, a validation follows
    it; ``sanity_seen``, the sanity check's calls reach the model's own
    forward hook (the ``self_call`` layout's; every layout's under a
    distributed strategy, which calls the wrapped model for each step)."""
    zeros = 1 + validated
    # A validation after the step is an evaluation of its own, in that
    # step's row (docs/hook.md, "An evaluation between steps"), whatever
    # the layout. Lightning zeroes the gradients before each validation
    # (on_validation_model_zero_grad): after the step it follows.
    order = LIGHTNING_ORDER + ["eval"] * validated
    if hook == "watch" and step == 0:
        # watch() in configure_optimizers runs before the Trainer's
        # model.zero_grad() and the sanity check: that zero_grad heads
        # step 0, and the check's no_grad calls of the module itself
        # show in it as "eval" (docs/integrations.md). The callback
        # watches after both.
        zeros += 1
        order = ["zero_grad", "forward", "loss", "backward", "step"] + ["eval"] * validated
        if layout == "self_call" or sanity_seen:
            order = ["zero_grad", "eval"] + order[1:5]
    return order, zeros
