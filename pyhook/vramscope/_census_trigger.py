"""When a census runs: asked for (by the monitor, or by ``vramscope.census()``),
and once more some steps after a census the monitor asked for on suspicion,
so that the monitor can tell what grew (docs/census.md, "When").

A request only arms the Watcher: the census runs on the training thread at
the next step boundary, in the branch of the step's end that only measured
steps take (a request makes the step a measured one by scheduling it), so a
plain step costs nothing more. The follow-up is armed by the sender thread
once the step counter has moved on.
"""

from . import _census, _safe

FOLLOW_UP_STEPS = 5  # steps between a census on suspicion and the next


class CensusMixin:
    """The census half of the Watcher (which defines ``_acts``, ``_client``,
    ``_model``, ``_optimizer`` and ``_torch``)."""

    _census_want = None  # (reason, request id) armed for the next step boundary

    def request_census(self, reason, request=None):
        """Take a census at the next step boundary (any thread; never blocks)."""
        if not self._active:
            return
        self._census_want = (reason, request)
        self._acts.scheduled = True  # the step's end takes the measured branch

    def rearm_census(self):
        """Keep a pending request armed: the step's own bookkeeping at its
        start may have cleared the schedule mark (sender thread)."""
        if self._census_want is not None and self._active:
            self._acts.scheduled = True

    def _census_at_step_end(self, step):
        want, self._census_want = self._census_want, None
        if want is None:
            return
        msg = self.take_census(want[0], want[1], step)
        if msg is not None and want[0] == "suspect":
            self._client.follow_up(self, step + FOLLOW_UP_STEPS, want[1])

    def take_census(self, reason, request=None, step=None, budget=_census.DEFAULT_BUDGET):
        """Take a census now, queue it for the monitor and return it (None on failure)."""
        client = self._client
        msg = _safe.call(_census.take, self._torch, self._device(), self._model,
                         self._optimizer, client.step if step is None else step, reason,
                         budget, request)
        if msg is not None:
            client.emit(msg)
        return msg

    def _device(self):
        first = next(iter(self._model.parameters()), None) \
            if hasattr(self._model, "parameters") else None
        return first.device.type if first is not None else "cpu"
