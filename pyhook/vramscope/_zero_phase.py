"""The zero_grad phase of the Watcher: the patched ``zero_grad`` of the
model and optimizer, and where a ``zero_grad`` between steps belongs (the
head of the next step or the tail of the last; docs/hook.md, "zero_grad
after the update"). Mixed into :class:`_watch.Watcher`."""

import sys
from time import monotonic as _monotonic

from . import _safe, _steps
from ._forward_phase import EVAL
from ._tracebacks import passed_through as _passed_through


class ZeroGradMixin:
    """zero_grad methods of the Watcher (which defines ``_begin``, ``_end``,
    ``_finish_step`` and the state they use)."""

    def started_mid_step(self):
        """Say that watch() ran inside step 0, after any zero_grad it had
        (auto-attach hooks at the first training forward): step 0 counts as
        having had its zero_grad, so the first zero_grad between steps is
        placed by where it is called (:meth:`_zero_shape`): after
        ``optimizer.step()`` it ends the step, before the forward it heads
        the next one."""
        with self._lock:
            self._zero_seen = True

    def _zero_grad(self, patched, *args, **kwargs):
        """``model.zero_grad()`` / ``optimizer.zero_grad()``, watched (the
        patch's entry, ``patched`` the method): zero_grad's begin, the call
        and its end in one frame (docs/hook.md, "Cost"). The hook's own
        errors are reported; the call's propagate, this frame out of their
        traceback."""
        t = _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        if not patched.on:  # undone, and left in place under another's wrapper
            try:
                return patched.call(args, kwargs)
            except BaseException as exc:
                _passed_through(exc)
                raise
        if self._fast and self._open is None \
                and (self._idle and self._zero_after is False and self._zero_seen_last
                     or self.framework_steps and not self._idle):
            # The fast path (no lock): the head of a step at rest, in a loop
            # that zeroes first; or under a framework's steps the zero_grad
            # after the update, which stays in the step (_zero_begin's head
            # of a step: a framework ends its steps itself).
            self._zero_depth = 1
            self._idle = False
            self._zero_seen = True
            self._open = "zero_grad"
            c = self._client  # Client.switch's tuple, queued as _fast allows
            c._queue.append((t, None, "zero_grad", c.step, c.micro, None, c.model))
        elif self._fast and (self._open == "zero_grad" or self._open == "loss") \
                and not self._zero_depth and self._tail_step is None and not self._client.micro \
                and not (self._step_called and not self._closure_depth) \
                and not (self._zero_after is False and self._zero_seen and self._open == "loss"):
            # The fast path (no lock) of a zero_grad between a step's first
            # forward and its backward (Lightning's, after training_step):
            # _zero_begin's head of a step, with its phase begun by a
            # framework's callback (on_before_zero_grad), or ending loss in
            # a step that did not begin with one (else _skipped_backward).
            self._zero_depth = 1
            self._idle = False
            self._zero_seen = True
            meter = self._acts.meter  # _recover's work at rest
            if meter is not None and meter.active:
                meter.stop()
            if self._open == "loss":
                self._open = "zero_grad"
                c = self._client  # Client.switch's tuple, queued as _fast allows
                c._queue.append((t, "loss", "zero_grad", c.step, c.micro, None, c.model))
        elif self._active:
            try:
                with self._lock:
                    self._fast = False
                    self._zero_begin()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        try:
            # zero_grad() called bare (the usual call) without building its arguments
            return patched.func(patched.ref(), *args, **kwargs) if args or kwargs \
                else patched.func(patched.ref())
        except BaseException as exc:
            _passed_through(exc)
            raise
        finally:
            if self._fast and self._zero_depth == 1 and self._open == "zero_grad":
                # The fast path's end (never a return here: it would drop
                # what the call returns or raises).
                self._zero_depth = 0
                self._open = None
                c = self._client
                if self._updated:
                    # A framework's zero_grad after the update: the step's
                    # last phase, whose read is the memory held between
                    # steps (the gradients it frees gone).
                    if c.switch("zero_grad", None, True):
                        self._after_tail()
                else:  # Client.switch's tuple, queued as _fast allows
                    c._queue.append((_monotonic(), "zero_grad", None, c.step, c.micro, None,
                                     c.model))
            elif self._active:
                try:
                    with self._lock:
                        depth = self._zero_depth - 1
                        if depth > 0:
                            self._zero_depth = depth
                        else:
                            self._zero_depth = 0
                            client = self._client
                            if self._open == "zero_grad" and self._tail_step is None:
                                # _end("zero_grad")'s every-step case: read
                                # on the first steps only (below _zero_until),
                                # and after a framework's update (above)
                                self._open = None
                                client.switch("zero_grad", None, self._updated or (
                                    client.step < self._zero_until and self._edge_reads))
                                if self._updated:
                                    self._after_tail()
                            else:
                                self._end("zero_grad")
                except Exception as exc:  # noqa: BLE001
                    _safe.report(exc)

    def _zero_begin(self):
        """zero_grad's begin off the fast path: the head of a step, or the
        tail of the last one (_zero_tail). (Lock held.)"""
        depth = self._zero_depth + 1
        self._zero_depth = depth
        if depth != 1:
            return
        failed = (self._open is not None or self._failed_bw is not None) \
            and self._close_failed()  # a step whose phase raised ends here
        if failed and self._zero_after:
            self._zero_tail()  # a loop known to zero after its update: the failed step's tail
            return
        # A step that took no backward ends here (_skipped_backward); this
        # zero_grad is the next one's head.
        ended = failed or self._open == "loss" and self._skipped_backward()
        # A zero-first loop, once decided, leaves at the third load.
        after, seen = self._zero_after, self._zero_seen_last
        # Not idle after a backward: a step that skipped its
        # update ends here first (_skipped_update). After a failed step,
        # the head of the next: a failed step tells nothing of the loop.
        if not ended and (self._idle or self._client.micro and self._skipped_update()) \
                and (not seen or after is not False) \
                and self._client.step > 0 and self._optimizer is not None \
                and self._open is None and (not seen or after or self._zero_shape()):
            self._skip_close = None  # (taken only where the zero_grad heads the next step)
            self._zero_tail()
            return
        # The head of a step (or, inside the optimizer's own update, a phase
        # of the step it is in: _in_update_method; or between the steps of
        # a split update's optimizers: _mid_update).
        if not self._stepped or not self._mid_update():  # (as _steps._step_pre asks)
            # copy of _activity()
            if self._step_called and not self._closure_depth and not self._in_update_method():
                self._finish_step()
            if self._unseen is not None:
                self._close_unseen()
            self._idle = False
        # copy of _recover()
        meter = self._acts.meter
        if meter is not None and meter.active:
            meter.stop()
        self._depth = 0
        self._skip_forward = False
        self._quiet = False
        self._zero_seen = True
        last = self._open
        close, self._skip_close = self._skip_close, None
        if close is not None and last is None:  # (the step before skipped its update)
            if self._client.owner is not self._self_ref:
                self._take_over()
            self._open = "zero_grad"
            # its begin edge carries the closing read of the step that skipped
            self._client.put(None, "zero_grad", close[0], False, None, close[1])
        elif last is None:  # _begin("zero_grad") with no end to read
            # copy of _open_first("zero_grad", None)
            if self._client.owner is not self._self_ref:
                self._take_over()
            self._open = "zero_grad"
            self._client.switch(None, "zero_grad", False, None)
        elif last != "zero_grad":
            self._begin("zero_grad")

    def _skipped_backward(self):
        """A zero_grad with the loss open, in a step that began with a
        zero_grad of its own in a loop known to zero first (_zero_shape):
        the loop took no backward and no optimizer.step() for that batch (a
        non-finite loss it skips), so that step ends here, one that skipped
        its update (True). A loop that zeroes between the loss and the
        backward (Lightning's closure, a loop written so) is never known to
        zero first: its zero_grad is never between steps. (Lock held.)"""
        if self._zero_after is not False or not self._zero_seen or self._step_called \
                or self._closure_depth \
                or self._optimizer is None or self.framework_steps or self._in_update_method():
            return False
        self._end("loss", closing=True)
        # Its training forward had no backward because the loop skipped it,
        # not because it takes gradients with torch.autograd.grad.
        self._trained = False
        self._finish_unplaced_step()
        return True

    def _skipped_update(self):
        """A zero_grad after a backward, with no optimizer.step() since: the step
        ran and skipped its update (a GradScaler that found inf gradients skips
        ``optimizer.step()``), never a micro-step of the next. Finish it (True);
        the zero_grad is then placed as after any step: the tail of the step
        in a loop that zeroes after the update, else the head of the next.
        Where it ended says nothing of the loop's shape. An evaluation
        begun after its last backward (_eval_in_step) ran after its training:
        it ends first. (Lock held.)"""
        if self._step_called or self._closure_depth or self._optimizer is None \
                or self._open is not None and self._open is not EVAL or self.framework_steps:
            return False  # a framework ends its steps itself (finish_open_step)
        if self._in_update_method():
            return False  # the optimizer's own, between its update's passes (SAM)
        client = self._client
        if self._perturbed_at == (client.step, client.micro - 1):
            # The last pass was an attack's (PGD in train mode, its gradient
            # taken with loss.backward()): the step's training pass follows.
            return False
        if self._open is EVAL:
            self._end_eval()
        if self._zero_after is False and self._zero_seen_last:
            # A loop known to zero first, whose zero_grad now heads the next
            # step (_zero_begin): a plain step's closing read is taken here
            # and goes out on that zero_grad's begin edge (docs/protocol.md,
            # "Exact peaks").
            self._skip_close = self._skipped_close()
        self._finish_unplaced_step()
        return True

    def _skipped_close(self, held=True):
        """The closing read of a plain step that skipped its update, and
        its plan (as at any step's close: _plan): ``(raw, extra)`` for the
        next step's first begin edge, ``extra`` naming the step it closes
        (``closes``) when the read gave a peak; None when nothing was read,
        or on a step whose phases' ends were read (no exact peaks, or a
        breakdown step: its last phase's end read closed it). ``held``
        False: the read's allocated is not what the step held. (Lock held.)"""
        client = self._client
        read = client.reader
        if read is None or not self._exact or self._edge_reads:
            return None
        raw = _safe.call(read)
        if raw is None:
            return None
        plan = self._step_plan()
        if plan is None:
            return raw, None
        closes = {"step": client.step}
        if "same_as" in plan and held:
            closes["same_as"] = plan["same_as"]
        if not held:
            closes["held"] = False
        return raw, {"closes": closes}

    def _finish_unplaced_step(self):
        """_finish_step for a step whose end says nothing of where the
        loop's steps end (one that skipped its update or failed): the
        frames _zero_shape compares with stay those of the first step that
        ended as the loop ends them; while none has, the next step to end
        is the first, where the schedule is asked and its frames are kept
        (the first step of a watch that joined mid-run, or of any, may be
        one that skipped its update). (Lock held.)"""
        frames = self._step_frames
        self._finish_step()
        if frames is None:
            self._step_frames = None
            self._due = min(self._due, self._client.step + 1)

    def _zero_shape(self):
        """Decide, once, whether this loop zeroes after ``optimizer.step()``:
        the step before this idle zero_grad had one at its head, which a loop
        that zeroes first has, and so has one that zeroes once before the loop
        and after every step (or step 0 under auto-attach, assumed to have
        had one). Where the call stands against step 0's tells them apart.
        (Lock held.)"""
        frames = self._step_frames
        if frames is None:
            # No step of this watcher has ended (a watch() that joined a
            # connection mid-run): a head, and nothing decided yet.
            return False
        self._step_frames = ()
        after = True if not frames else _steps.zero_follows_step(
            frames, _steps.user_frames(sys._getframe(1)))
        self._zero_after = after
        return after

    def _zero_tail(self):
        """A loop that zeroes after optimizer.step(): the step just finished had
        no zero_grad, so this one is its tail, not the head of a step of its own
        (the last one would be a step with nothing but zero_grad). The step
        stays idle. (Lock held.)"""
        self._fast = False
        self._recover()
        self._begin("zero_grad", step=self._client.step - 1)
