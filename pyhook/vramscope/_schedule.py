"""When saved activations are measured, and how fresh the figure each
anatomy message carries is (docs/protocol.md, the anatomy's activations
fields; docs/anatomy.md, "When the split is taken").
"""

import sys

from ._meter import in_compiled_call


FIRST_MEASURED = 3  # steps 0, 1 and 2 are always measured
REMEASURE_RATIO = 2.0  # re-measure at most once per doubling of the input
# The split by module is taken again at least once in this many measured
# steps, and when a measured total moved by more than 1/SPLIT_NOISE of the
# total the last split was taken at.
SPLIT_EVERY = 10
# Splits in a row without the loss's part after which an unmeasured loss
# no longer takes the split (step 0's has none where its backward's path
# is not known yet; the next one measures it).
LOSSLESS_RETRIES = 2
SPLIT_NOISE = 100
# Inputs that vary step to step (dynamic padding): once this many steps in
# a row came with a size other than the last anatomy's and the step
# before's, a scaled anatomy goes at most once in SCALED_EVERY steps (a
# size that then holds a second step is sent at once). The monitor scales the last
# measurement to each step's own input itself (the forward's ``input``),
# labelled; the message only refreshes the static figures.
VARYING_RUN = 3
SCALED_EVERY = 10


def size_ratio(batch, tokens, measured):
    """Return the input-size ratio of (batch, tokens) to a measurement: tokens
    when both sides know them, else batch; None when neither compares."""
    if tokens is not None and measured.get("tokens"):
        return tokens / measured["tokens"]
    if batch is not None and measured.get("batch"):
        return batch / measured["batch"]
    return None


class Activations:
    """Activations decides when saved activations are measured and how fresh
    the figure each anatomy message carries is (docs/protocol.md, the anatomy's
    activations fields).

    Steps 0-2 and every ``every``-th step are measured. A step whose first
    training forward is at least twice the input size of the last measurement
    is measured too (so at most once per doubling); any other step whose input
    size differs from the last anatomy sent gets an anatomy message whose
    activations are the last measurement scaled by the size ratio, labelled
    ``"scaled"``.

    A measured step takes the split by module (the message's ``saved``,
    docs/anatomy.md "By module") when it is one of steps 0-2 or the first
    measured step of the watch, when its input size differs from the
    split's, when the split's loss was not measured (unless the last
    LOSSLESS_RETRIES splits all missed it), when the last measured
    total moved beyond the noise (SPLIT_NOISE) from the split's, and at
    least once in SPLIT_EVERY measured steps; the others measure the total
    alone (``saved`` null: the monitor keeps the last split, labelled with
    its step and total).
    """

    def __init__(self, meter, every):
        self.meter = meter
        self.every = every
        self.measured = None  # {"step", "batch", "tokens", "activations"}
        self.sent = None  # (batch, tokens) of the last anatomy message
        # Steps in a row, up to the last (changed_at, of size changed_to),
        # whose size was neither the last anatomy's nor the step before's;
        # the first step that may send a scaled anatomy while they run on
        # (VARYING_RUN, SCALED_EVERY).
        self.changed_at = -2
        self.changed_to = None
        self.changes = 0
        self.scaled_due = 0
        # (batch, tokens) last compared with the measurement (read by the
        # Watcher's inlined note_input)
        self.checked = None
        self.scheduled = False
        self.hold = False  # a census is due: keep scheduling (CensusMixin)
        self.measuring = False
        self.remeasured = False
        self.total = None
        # A micro-step's meter could not see what was saved (a user's
        # saved-tensor hooks: SavedTensorMeter.hidden): the step is unmeasured.
        self.hidden = False
        self.batch = None
        self.tokens = None
        self.saved = None  # the measured micro-step's by-module breakdown
        self.step = None  # the step prepared
        # The last split taken: (batch, tokens, activations, whether its
        # loss was measured); None before the first.
        self.split = None
        self.unsplit = 0  # measured steps since, without the split
        self.split_due = False  # a measured total moved: the next one splits
        self.split_loss = False  # the step's split has its loss
        # Splits in a row whose loss was not measured: past LOSSLESS_RETRIES
        # the loop's layout leaves the loss unmeasured (a training_step, a
        # loop calling the model's children, a user's saved-tensor hooks),
        # and another split would not measure it either.
        self.lossless = 0

    def scheduled_at(self, step):
        """Report whether ``step`` is measured by the schedule."""
        return step < FIRST_MEASURED or (self.every > 0 and step % self.every == 0)

    def breakdown_at(self, step):
        """Report whether ``step`` reads every phase by the schedule (a
        breakdown step, docs/protocol.md "Exact peaks"): steps 0-2, then
        one in ``every``, halfway between two measured steps, so that no
        measured step pays for the phase reads too (none with ``every`` < 2)."""
        every = self.every
        return step < FIRST_MEASURED or (every > 1 and step % every == every // 2)

    def schedule(self, step):
        """Return whether the schedule measures ``step``, whether it reads
        its phases (:meth:`breakdown_at`), and the first step after it that
        it measures or reads so (1 << 62 when no later step is)."""
        nxt = step + 1
        every = self.every
        if nxt < FIRST_MEASURED:
            after = nxt
        elif every <= 0:
            after = 1 << 62
        else:
            after = -(-nxt // every) * every  # the next measured step
            if every > 1:
                half = after - every + every // 2  # the breakdown before it
                if half >= nxt:
                    after = half
        # scheduled_at and breakdown_at, written out
        if step < FIRST_MEASURED:
            return True, True, after
        if every <= 0:
            return False, False, after
        return step % every == 0, every > 1 and step % every == every // 2, after

    def prepare(self, step):
        """Start bookkeeping for ``step``; an unmeasured step touches no meter.
        While ``hold`` is set (a census is due) every step ends as a
        scheduled one, measured or not by the schedule alone."""
        every = self.every
        measured = step < FIRST_MEASURED or (every > 0 and step % every == 0)  # scheduled_at
        self.scheduled = measured or self.hold
        meter = self.meter
        self.measuring = meter is not None and measured
        self.remeasured = False
        self.total = None
        self.hidden = False
        self.saved = None
        self.split_loss = False
        self.step = step
        self.batch = self.tokens = None
        if meter is not None:
            if measured and meter.touched:  # (reset's own test)
                meter.reset()
            meter.tensors = meter.weights = None  # a measured step's start() lists them again

    def note_input(self, size):
        """Record a training forward's input size (the step keeps the largest)."""
        first = self.batch is None and self.tokens is None
        b, t = size.get("batch"), size.get("tokens")
        if b is not None and (self.batch is None or b > self.batch):
            self.batch = b
        if t is not None and (self.tokens is None or t > self.tokens):
            self.tokens = t
        if first and not self.measuring and self.meter is not None \
                and self.measured is not None and (b, t) != self.checked:
            self.checked = (b, t)  # a size seen before was checked then
            r = size_ratio(self.batch, self.tokens, self.measured)
            if r is not None and r >= REMEASURE_RATIO:
                self.measuring = True
                self.remeasured = True
                self.meter.reset()
                self.meter.tensors = self.meter.weights = None  # walked at its start

    def start(self):
        """Install the meter for a training forward of a measured step."""
        if self.measuring:
            # in_compiled_call's first test, written out: no frame walked
            # before dynamo is imported
            if "torch._dynamo.eval_frame" in sys.modules and (
                    in_compiled_call(sys._getframe(1)) or self.meter.runs_compiled()):
                # The model, or a module of it, was compiled after watch()
                # (or is called from compiled code, as the HF Trainer's
                # torch_compile does): the meter's hooks would run inside it.
                self.meter, self.measuring = None, False
                return
            if self.total is None:  # the step's first measured forward
                self.total = 0
                last = self.split
                self.meter.split = (
                    last is None or self.step < FIRST_MEASURED or self.split_due
                    or not last[3] and self.lossless < LOSSLESS_RETRIES
                    or self.unsplit + 1 >= SPLIT_EVERY
                    or self.batch != last[0] or self.tokens != last[1])
            self.meter.start()

    def pause(self):
        """Remove the meter's hooks, keeping what it counted."""
        meter = self.meter
        if meter is not None and meter.active:
            meter.stop()

    stop = pause

    def forward_done(self):
        """The model's forward ended with an output to train on, its
        backward to come through the wrapper (a measured step): pause, and
        on a step that takes the split count what is saved until the
        backward starts as the loss's."""
        meter = self.meter
        if meter.active:
            meter.stop()
        if meter.split and self.total is not None:
            meter.start_loss()

    def collect(self):
        """Fold the current micro-step's count into the step's (the largest
        wins, with its breakdown by module)."""
        if not self.measuring or self.total is None:
            return
        meter = self.meter
        if meter.active:  # pause(), written out
            meter.stop()
        if not meter.touched:
            return  # nothing counted since the last collect (reset's own test)
        if meter.hidden:
            self.hidden = True
        if meter.split and (self.saved is None or meter.total > self.total):
            try:
                self.saved = meter.breakdown()
                self.split_loss = meter.loss_sizes is not None
            except Exception as exc:  # noqa: BLE001 - the totals stand without it
                from . import _safe
                _safe.report(exc)
        self.total = max(self.total, meter.total)
        meter.reset()

    def finish(self, step):
        """Return the activation fields of ``step``'s anatomy message (plus its
        ``batch``), or None when the step sends none."""
        size = (self.batch, self.tokens)
        if not self.measuring and not self.scheduled and size == self.sent:
            return None  # the common step: nothing measured, nothing new to say
        meter = self.meter
        if self.measuring and (meter.active or meter.touched):
            self.collect()  # (its own tests, but for the count it took)
        if self.measuring and self.total is not None and not self.hidden:
            self.checked = size  # its own size: nothing to compare later
            self.measured = {"step": step, "batch": self.batch, "tokens": self.tokens,
                             "activations": self.total}
            # the split taken, or a step without it and whether its total moved
            if meter.split:
                self.split = (self.batch, self.tokens, self.total, self.split_loss)
                self.lossless = 0 if self.split_loss else self.lossless + 1
                self.unsplit = 0
                self.split_due = False
            else:
                self.unsplit += 1
                last = self.split
                if last is not None and abs(self.total - last[2]) > last[2] // SPLIT_NOISE:
                    self.split_due = True
            self.sent = size
            return {"activations": self.total, "activations_step": step,
                    "activations_batch": self.batch, "activations_tokens": self.tokens,
                    "activations_source": "measured", "tokens": self.tokens,
                    "batch": self.batch, "saved": self.saved}
        known = self.batch is not None or self.tokens is not None
        if self.scheduled:
            if known:
                self.sent = size
            return self._scaled()
        if self.measured is not None and known and size != self.sent:
            changes = self.changes + 1 if self.changed_at == step - 1 and size != self.changed_to \
                else 1
            self.changed_at, self.changed_to, self.changes = step, size, changes
            if changes >= VARYING_RUN:
                if step < self.scaled_due:
                    return None  # the monitor scales to this step's input itself
                self.scaled_due = step + SCALED_EVERY
            self.sent = size
            return self._scaled()
        return None

    def _scaled(self):
        m = self.measured
        r = size_ratio(self.batch, self.tokens, m) if m is not None else None
        out = {"tokens": self.tokens, "batch": self.batch, "activations": None,
               "activations_step": None, "activations_batch": None,
               "activations_tokens": None, "activations_source": None}
        if r is not None:
            out.update(activations=int(round(m["activations"] * r)),
                       activations_step=m["step"], activations_batch=m["batch"],
                       activations_tokens=m["tokens"], activations_source="scaled")
        return out
