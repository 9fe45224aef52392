"""When a census runs: asked for (by the monitor, or by ``vramscope.census()``),
and once more some steps after a census the monitor asked for on suspicion,
so that the monitor can tell what grew (docs/census.md, "When").

A request only arms the Watcher: the census runs on the training thread at
the end of a step, in the branch of the step's end that only measured steps
take. While a census is due, ``Activations.hold`` makes every step end as a
scheduled one (not a measured one: nothing more is measured), so a plain
step never pays for it and no request waits on the sender's timing.
"""

from . import _capture, _census, _devices, _safe

FOLLOW_UP_STEPS = 5  # steps between a census on suspicion and the next


class CensusMixin:
    """The census half of the Watcher (which defines ``_acts``, ``_client``,
    ``_model``, ``_optimizer`` and ``_torch``)."""

    # (reason, request id, the first step whose end takes it, capture dir), or None
    _census_want = None
    _capture = None  # the allocator history window in progress (_capture.Capture)

    def request_census(self, reason, request=None, at_step=0, capture_dir=None):
        """Take a census at the end of the first step from ``at_step`` on
        (any thread; never blocks). ``capture_dir``: on suspicion on CUDA,
        record the allocator's history until the follow-up and write it there."""
        if not self._active:
            return
        self._census_want = (reason, request, at_step, capture_dir)
        self._fast = False  # the step's end goes the general way, which takes it
        acts = self._acts
        acts.hold = True
        acts.scheduled = True  # the current step's end takes the measured branch

    def _census_at_step_end(self, step):
        want = self._census_want
        if want is None or step < want[2]:
            return
        self._census_want = None
        self._acts.hold = False
        extra = None
        if want[0] == "followup" and self._capture is not None:
            cap, self._capture = self._capture, None
            extra = _safe.call(lambda: {"capture": cap.finish(step)})
        msg = self.take_census(want[0], want[1], step, extra=extra)
        if msg is not None and want[0] == "suspect":
            self.request_census("followup", want[1], step + FOLLOW_UP_STEPS)
            if want[3] is not None and self._capture is None and self._on_cuda() \
                    and _capture.supported(self._torch):
                cap = _capture.Capture(self._torch, want[3], self._client.session)
                if _safe.call(cap.start, step):
                    self._capture = cap

    def end_capture(self):
        """Switch off a history window still open (the watch is removed)."""
        cap, self._capture = self._capture, None
        if cap is not None:
            cap.mem._record_memory_history(None)

    def _on_cuda(self):
        cuda = self._client.cuda
        return cuda is not None and not isinstance(cuda, _devices._Seam)

    def take_census(self, reason, request=None, step=None, budget=None, extra=None,
                    ended_frames=()):
        """Take a census now, queue it for the monitor and return it (None on
        failure). ``extra``: fields to send in it besides (``allocator`` at an
        out-of-memory error, ``capture`` at the end of a capture window);
        ``ended_frames``: see :func:`_census.take`."""
        client = self._client
        if budget is None:
            budget = _census.DEFAULT_BUDGET
        msg = _safe.call(_census.take, self._torch, self._device(), self._model(),
                         self._optimizers(), client.step if step is None else step, reason,
                         budget, request, ended_frames)
        if msg is not None:
            if extra:
                msg["census"].update(extra)
            client.emit(msg)
        return msg

    def _device(self):
        model = self._model()
        first = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
        return first.device.type if first is not None else "cpu"
