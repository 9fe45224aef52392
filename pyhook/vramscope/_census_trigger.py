"""When a census runs: asked for (by the monitor, or by ``vramscope.census()``),
and once more some steps after a census the monitor asked for on suspicion,
so that the monitor can tell what grew (docs/census.md, "When").

A request only arms the Watcher: the census runs on the training thread at
the end of a step, in the branch of the step's end that only measured steps
take. While a census is due, ``Activations.hold`` makes every step end as a
scheduled one (not a measured one: nothing more is measured), so a plain
step never pays for it and no request waits on the sender's timing.
"""

from . import _census, _safe

FOLLOW_UP_STEPS = 5  # steps between a census on suspicion and the next


class CensusMixin:
    """The census half of the Watcher (which defines ``_acts``, ``_client``,
    ``_model``, ``_optimizer`` and ``_torch``)."""

    # (reason, request id, the first step whose end takes it), or None
    _census_want = None

    def request_census(self, reason, request=None, at_step=0):
        """Take a census at the end of the first step from ``at_step`` on
        (any thread; never blocks)."""
        if not self._active:
            return
        self._census_want = (reason, request, at_step)
        acts = self._acts
        acts.hold = True
        acts.scheduled = True  # the current step's end takes the measured branch

    def _census_at_step_end(self, step):
        want = self._census_want
        if want is None or step < want[2]:
            return
        self._census_want = None
        self._acts.hold = False
        msg = self.take_census(want[0], want[1], step)
        if msg is not None and want[0] == "suspect":
            self.request_census("followup", want[1], step + FOLLOW_UP_STEPS)

    def take_census(self, reason, request=None, step=None, budget=None, allocator=None):
        """Take a census now, queue it for the monitor and return it (None on
        failure). ``allocator``: the allocator's state to send with it (an
        out-of-memory census, _fragments.state)."""
        client = self._client
        if budget is None:
            budget = _census.DEFAULT_BUDGET
        msg = _safe.call(_census.take, self._torch, self._device(), self._model,
                         self._optimizer, client.step if step is None else step, reason,
                         budget, request)
        if msg is not None:
            if allocator is not None:
                msg["census"]["allocator"] = allocator
            client.emit(msg)
        return msg

    def _device(self):
        first = next(iter(self._model.parameters()), None) \
            if hasattr(self._model, "parameters") else None
        return first.device.type if first is not None else "cpu"
