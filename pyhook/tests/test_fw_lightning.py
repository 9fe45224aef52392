"""Real Lightning: ``Trainer.fit`` on CPU with the callback and
with ``watch()`` in ``configure_optimizers``, against a real ``vramscope
record`` and ``report --json``. Each fit also runs without the hook: the
weights must be bit-identical and the output the same."""

import csv
import hashlib
import json
import os
import time

import pytest

import vramscope
from conftest import FakeMonitor
from frameworks import PHASES, Recording, lightning, phase_counts, phase_order, quietly

BATCHES = 6
PAUSE = 0.04  # seconds, of the slow submodule and the slow loss


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


def fit(torch, mode, hook, sock=None, layout="self_call", slow=False, callback_kw=None,
        callback=None, batches=BATCHES, extra_callbacks=(), **trainer_kw):
    L = lightning()
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
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks,
                        limit_val_batches=2, num_sanity_val_steps=1, **trainer_kw)
    trainer.fit(module, train, val)
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


def check_fit(case, hook, layout, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    mode, kw = CASES[case]
    want, plain_warnings = quietly(fit, torch_mod, mode, None, layout=layout, **kw)
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = quietly(fit, torch_mod, mode, hook, sock=rec.sock, layout=layout, **kw)
    out = capfd.readouterr()
    assert got == want, "the hook changed the weights or the step count"
    assert hooked_warnings == plain_warnings, "the hook warned"
    text = out.out + out.err
    assert "vramscope:" not in text and "Traceback" not in text, text
    proc = rec.process()
    steps = want[1]
    assert proc["steps_total"] == steps, [phase_order(s) for s in proc["steps"]]
    micro = kw.get("accumulate_grad_batches", 1)
    every = kw.get("val_check_interval", BATCHES) // micro
    for s in proc["steps"]:
        counts = phase_counts(s)
        # Lightning zeroes the gradients before each validation
        # (on_validation_model_zero_grad): after the step it follows.
        validated = (s["step"] + 1) % every == 0
        zeros = 1 + validated
        # A validation after the step is an evaluation of its own, in that
        # step's row (docs/hook.md, "An evaluation between steps"), whatever
        # the layout.
        want = sorted(PHASES + ["eval"] * validated)
        order = LIGHTNING_ORDER + ["eval"] * validated
        if hook == "watch" and s["step"] == 0:
            # watch() in configure_optimizers runs before the Trainer's
            # model.zero_grad() and the sanity check: that zero_grad heads
            # step 0, and the check's no_grad calls of the module itself
            # show in it as "eval" (docs/integrations.md). The callback
            # watches after both.
            zeros += 1
            order = ["zero_grad", "forward", "loss", "backward", "step"] + ["eval"] * validated
            if layout == "self_call":
                want, order = sorted(PHASES + ["eval"]), ["zero_grad", "eval"] + order[1:5]
        assert phase_order(s) == order, (case, s["step"], phase_order(s))
        assert sorted(counts) == want, (case, s["step"], phase_order(s))
        assert counts["step"] == 1 and counts["zero_grad"] == zeros, (s["step"], counts)
        assert counts["forward"] == counts["loss"] == counts["backward"] == micro, counts


@pytest.mark.parametrize("hook", ["callback", "watch"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("layout", ["self_call", "submodules"])
def test_lightning_fit(layout, case, hook, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    check_fit(case, hook, layout, torch_mod, vs_bin, workdir, recorders, capfd)


@pytest.mark.parametrize("case", ["automatic", "manual", "accumulation"])
@pytest.mark.parametrize("layout", ["loss_module", "labels", "functional"])
def test_lightning_layouts(layout, case, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    check_fit(case, "callback", layout, torch_mod, vs_bin, workdir, recorders, capfd)


def phase_durations(path):
    """{(step, micro, phase): seconds} of the automatic phases in a recording,
    from the hook's own edge times."""
    began, took = {}, {}
    with open(path) as f:
        next(f)
        for line in f:
            m = json.loads(line).get("msg") or {}
            if m.get("type") != "phase" or m.get("user"):
                continue
            key = (m["step"], m["micro"], m["name"])
            if m["edge"] == "begin":
                began[key] = m["t"]
            elif key in began:
                took[key] = m["t"] - began.pop(key)
    return took


def test_forward_ends_where_the_models_computation_ends(torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    """training_step calls two submodules, computes its loss, then updates a
    metric module; the last submodule and the loss computation each sleep
    PAUSE: forward holds the first, loss the second (the metric, whose
    output needs no gradient, moves nothing)."""
    rec = Recording(vs_bin, workdir, recorders)
    fit(torch_mod, "automatic", "callback", sock=rec.sock, layout="slow_loss", slow=True)
    rec.process()  # stops the recorder: the file holds every edge
    took = phase_durations(rec.out)
    for step in range(BATCHES):
        fwd, loss = took[(step, 0, "forward")], took[(step, 0, "loss")]
        # Lower bounds only (a loaded machine stretches either): ended at
        # the first submodule, forward would miss the slow one; ended at
        # training_step's return, loss would be short.
        assert fwd >= PAUSE and loss >= PAUSE, (step, took)


def update_ends(path):
    """{step: (peak, held)} of each step's edges up to its update's end
    (the ``step`` end edge), and the steps a later ``zero_grad`` ends
    (Lightning zeroes the gradients before a validation), from a recording."""
    figures, ended, tails = {}, set(), set()
    with open(path) as f:
        next(f)
        for line in f:
            m = json.loads(line).get("msg") or {}
            if m.get("type") != "phase" or m.get("user") or not m.get("mem"):
                continue
            step, mem = m["step"], m["mem"]
            if step in ended:
                tails.add(step)
                continue
            peak = max(figures.get(step, (0, 0))[0], mem["max_allocated"])
            figures[step] = (peak, mem["allocated"])
            if m["name"] == "step" and m["edge"] == "end":
                ended.add(step)
    return figures, tails


def test_figures_in_the_users_csv_log(torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    """VramscopeCallback(log_figures=True) logs each step's peak, held memory
    and the need through the Trainer's logger: the same bytes as vramscope's
    own report of the same run. Off by default: the log has none. A step
    that Lightning's zero_grad before the validation ends (the last) is
    read once more in the report, after that zero_grad, which the logger,
    called at the update's end, cannot wait for: its figures are the
    step's reads up to the update's end (docs/integrations.md)."""
    L = lightning()
    logs = {}
    for on in (False, True):
        rec = Recording(vs_bin, workdir, recorders, name="csv%d" % on)
        logger = L.pytorch.loggers.CSVLogger(workdir, name="csv%d" % on)
        fit(torch_mod, "automatic", "callback", sock=rec.sock, callback_kw={"log_figures": on},
            logger=logger, log_every_n_steps=1, layout="submodules")
        with open(os.path.join(logger.log_dir, "metrics.csv")) as f:
            logs[on] = list(csv.DictReader(f))
        proc = rec.process()
    assert not any(k.startswith("vramscope") for row in logs[False] for k in row), logs[False][0]
    rows = {int(r["step"]): r for r in logs[True] if r.get("vramscope/step_peak_allocated")}
    assert sorted(rows) == list(range(BATCHES)), logs[True]
    assert proc["memory"]["peaks"] == "exact", proc["memory"]
    at_update, tails = update_ends(rec.out)
    assert tails == {BATCHES - 1}, tails  # the epoch's validation follows the last step
    need = 0
    for s in proc["steps"]:
        row = rows[s["step"]]
        assert s["peak_known"] == "exact", s
        peak, held = s["peak_allocated"], s["held"]
        if s["step"] in tails:
            peak, held = at_update[s["step"]]
        assert float(row["vramscope/step_peak_allocated"]) == peak, (row, s)
        assert float(row["vramscope/held_allocated"]) == held, (row, s)
        need = peak if s["step"] <= 1 else max(need, peak)
        assert float(row["vramscope/need_allocated"]) == need, (row, s)
        assert float(row["vramscope/need_exact"]) == 1.0, row


@pytest.mark.parametrize("hook", ["callback", "watch"])
@pytest.mark.parametrize("case,layout", [("validation", "submodules"),
                                         ("accumulation", "submodules"),
                                         ("bf16-mixed", "submodules"),
                                         ("automatic", "self_call"),
                                         ("automatic", "functional")])
def test_the_fast_paths_send_what_the_general_paths_send(case, layout, hook, torch_mod, workdir):
    """The same fit twice, once with the watch's fast paths turned off: the
    same phase edges, step by step (their times and reads aside), with the
    callback and with watch() in configure_optimizers. The steps at rest
    take them (docs/hook.md, "Lightning's steps")."""
    L = lightning()  # skips where Lightning is not installed
    from vramscope.integrations.lightning import VramscopeCallback

    class Counting(L.Callback):
        """After the watch's own callback: its fast paths on or off, and
        whether each batch ended with the loop at rest."""

        def __init__(self, fast, watched):
            self.fast, self.watched, self.taken = fast, watched, []

        def on_train_start(self, trainer, pl_module):
            self.watched(pl_module)._fast_loop = self.fast

        def on_train_batch_end(self, trainer, pl_module, *args):
            self.taken.append(self.watched(pl_module)._fast)

    mode, kw = CASES[case]
    micro = kw.get("accumulate_grad_batches", 1)
    steps = 8
    edges, taken = {}, {}
    for fast in (True, False):
        mon = FakeMonitor(os.path.join(workdir, "m%d.sock" % fast)).start()
        cb = VramscopeCallback(socket=mon.path) if hook == "callback" else None
        counting = Counting(fast, (lambda m: cb._vramscope.watcher) if cb is not None
                            else (lambda m: m.handle.watcher))
        try:
            fit(torch_mod, mode, hook, sock=mon.path, layout=layout, callback=cb,
                batches=steps * micro, extra_callbacks=[counting], **kw)
            assert mon.wait_for(lambda m: any(x.get("type") == "goodbye" for x in m.messages()))
            edges[fast] = [(m["name"], m["edge"], m["step"], m.get("micro"), m.get("input"),
                            m.get("user", False)) for m in mon.messages()
                           if m.get("type") == "phase"]
        finally:
            mon.stop()
        taken[fast] = counting.taken
    assert edges[True] == edges[False]
    assert len(edges[True]) > 10 * steps, edges[True]
    assert not any(taken[False])
    # (steps 0-2 are measured, and a validation leaves the rest state)
    assert sum(taken[True]) >= (steps - 4) * micro, taken[True]
