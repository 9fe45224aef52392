"""The figures a framework callback puts in the user's own logger, from
the hook's own reads (docs/integrations.md, "vramscope's figures in your
logger"): each step's peak and held memory, and the need.

* **step peak**: the largest peak among the step's reads. With exact peaks
  each read's peak covers the interval since the read before it (the
  counters are reset after every read), so the largest one is the step's
  peak, exact. A step the hook read once (a plain step) has that one read,
  which covers the whole step.
* **held**: ``allocated`` at the step's last read, where the step closes
  (after the optimizer step, or after the ``zero_grad`` that ends the step
  in a loop or a framework that zeroes after the update): what stays
  between steps, as the monitor's step table has it.
* **need**: the largest step peak from step 1 on (step 0's while it is the
  only one): step 0 allocates the optimizer state and warms the caches, as
  the monitor's diagnosis leaves its first steps out of the need.
* **need exact**: 1 when every step the need covers had its closing read
  (so its peak is the counter's, exact); 0 when one had none (a read that
  failed): that step may have peaked higher, so the need is a lower bound.

Only a source with exact peaks (CUDA, ROCm, the host where its peak RSS can
be reset) gives these figures; without them a callback logs nothing.
"""

from . import _cuda

# The names, as logged: the framework's separator between the prefix and the name.
PREFIX = "vramscope"
NAMES = ("step_peak_allocated", "held_allocated", "need_allocated", "need_exact")


class StepFigures:
    """StepFigures keeps the last finished step's peak and held memory and the need."""

    def __init__(self):
        self.step = -1  # the last step with figures
        self.peak = self.held = None
        self.need = None
        self.need_exact = True
        self._first = None  # step 0's peak, the need until step 1 ends
        self._steady = None  # the largest peak from step 1 on

    def add(self, step, reads):
        """Take step ``step``'s reads (each a read_raw() value; the last is
        its closing read)."""
        pairs = [p for p in map(_cuda.peak_held, reads) if p is not None]
        if not pairs:
            if step > 0:
                self.need_exact = False
            return
        peak = max(p[0] for p in pairs)
        self.step, self.peak, self.held = step, peak, pairs[-1][1]
        if step == 0:
            self._first = peak
        else:
            self._steady = peak if self._steady is None else max(self._steady, peak)
        self.need = self._steady if self._steady is not None else self._first

    def metrics(self, sep="/"):
        """The figures as ``{name: float}``, named ``vramscope<sep><name>``."""
        values = (self.peak, self.held, self.need, 1.0 if self.need_exact else 0.0)
        return {PREFIX + sep + n: float(v) for n, v in zip(NAMES, values) if v is not None}
