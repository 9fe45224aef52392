"""Steps that failed: a phase an error unwound (an out-of-memory error, a
bad batch) in a loop that catches it and goes on, as fairseq's trainer
skips the batch and accelerate's ``find_executable_batch_size`` retries
with a smaller one (docs/hook.md, "A step that failed"). The phase's end
edge carries ``failed`` (docs/protocol.md) and the step ends there; the
loop's next zero_grad or training forward belongs to the next step. Mixed
into :class:`_watch.Watcher`.

What tells the hook a phase failed:

* a forward of the model that never returned: its depth is still counted
  at the next zero_grad, or at the next forward of the model while none
  of its calls is running;
* a backward that raised through the global wrapper (``unwound``);
* an ``optimizer.step()`` that never returned: its step hooks' depth is
  still counted (torch 2.x: no post hook ran), or its patch saw it raise
  (torch 1.13), at the next zero_grad or training forward;
* the allocator's out-of-memory observer, which torch calls just before
  it raises, while ``forward``, ``loss``, ``backward`` or ``step`` was
  open, and that phase then ended by something other than its successor.
"""

import sys

from ._compiled import MODULE_FILE
from ._closing import SPAN_STEP

FAILED_OOM = "oom"  # the allocator's out-of-memory observer fired in the phase
FAILED_ERROR = "error"  # any other error

# torch's frames that call a module (torch 2.x's _call_impl had an inner())
_CALLS = frozenset(("_call_impl", "_wrapped_call_impl", "inner"))
# How far up the stack a forward of the model looks for one still running
_RUNNING_DEPTH = 64


def _torch_call(code):
    return code.co_name in _CALLS and code.co_filename.endswith(MODULE_FILE)


class FailedStepsMixin:
    """A step whose phase raised, ended where the loop goes on."""

    def note_oom(self):
        """The allocator ran out of memory (its observer: the error raises
        next) in this watch's open phase. Its fast paths stop, so the next
        edge asks _close_failed. No lock: called from inside the allocator."""
        self._oom_at = (self._client.step, self._open)
        self._fast = False

    def _failure(self, module):
        """Why the open phase of this step failed (FAILED_OOM or
        FAILED_ERROR), None when nothing says it did. ``module``: the
        module whose forward is starting (None at a zero_grad, which no
        forward runs around). (Lock held.)"""
        step, last, oom = self._client.step, self._open, self._oom_at
        if self._depth and not (module is not None and self._forward_running(module)):
            if last == "forward":
                return FAILED_OOM if oom == (step, "forward") else FAILED_ERROR
            # Another forward that never returned (an evaluation's): no
            # step of training failed, but its depth is no forward's now.
            self._recover()
        if last == "loss" and oom == (step, "loss"):
            return FAILED_OOM
        if last == "step" and self._step_depth and not self._closure_depth \
                and not self._in_update_method():
            # Its step() raised (Adam's state had no room on the first step)
            return FAILED_OOM if oom == (step, "step") else FAILED_ERROR
        failed = self._failed_bw
        if last is None and failed is not None and failed[0] == step:
            return failed[1]
        return None

    def _forward_running(self, module):
        """Whether a call of ``module`` is on this thread's stack (a forward
        that calls the model again), beyond the one starting: then a depth
        is counted for a reason."""
        frame = sys._getframe(1)
        # This call's own frames: the hook's, then torch's call of the module
        while frame is not None and not _torch_call(frame.f_code):
            frame = frame.f_back
        while frame is not None and _torch_call(frame.f_code):
            frame = frame.f_back
        for _ in range(_RUNNING_DEPTH):
            if frame is None:
                return False
            if _torch_call(frame.f_code) and frame.f_locals.get("self") is module:
                return True
            frame = frame.f_back
        return True  # deeper than looked: taken as running, as before

    def _close_failed(self, module=None):
        """End this step as failed when its open phase raised (_failure):
        that phase's end edge carries ``failed`` (with the step's closing
        read), and the step is over. Returns True when it ended one. A
        framework's step stays open (its callbacks end it): the phase's
        edge says failed, without the step's closing read. (Lock held.)"""
        why = self._failure(module)
        if why is None:
            return False
        self._oom_at = self._failed_bw = None
        self._recover()
        last = self._open
        if self.framework_steps:
            if last is not None:
                self._end(last, failed=why)
            return False
        if last is not None:
            self._end(last, closing=True, failed=why)
        # Its training forward had no backward because it raised, not
        # because the loop takes gradients with torch.autograd.grad; and
        # where it ended says nothing of where the loop's steps end
        # (_zero_shape).
        self._trained = False
        self._finish_unplaced_step()
        self._restart_due = True
        self._fast = False  # the next training forward restarts the peaks
        return True

    def _restart_peaks(self):
        """The first training forward after a failed step: what the failed
        attempt held (its traceback's frames keep its tensors until the
        loop's except clause ends) is gone, so the peak counters restart
        here, or the next step's peak would be the memory still held when
        the failed step's closing read reset them. One read and its reset,
        which the user's counters keep as they keep every read of the
        hook's (docs/hook.md, "Exact peaks and your counters"), and which is
        no read of the step's. (Lock held.)"""
        self._restart_due = False
        client = self._client
        read, peaks = client.reader, client.peaks
        if read is None or peaks is None:
            return
        raw = read()
        reads = peaks.step_reads
        if raw is not None and reads and reads[-1] is raw:
            reads.pop()

    def _failed_extra(self, raw, why):
        """The extra fields of a failed phase's end edge: the closing read's
        plan (_step_plan) when it read, never ``same_as`` (a failed step is
        like no other), and ``failed``. The next step reads its phases."""
        extra = self._step_plan() if raw is not None else None
        if extra is not None and "same_as" in extra:
            extra = SPAN_STEP
        self._moved = True
        out = dict(extra) if extra else {}
        out["failed"] = why
        return out

    def _backward_failed(self):
        """At the end of a backward that raised (``unwound`` in this step):
        why, remembered until the step ends where the loop goes on; else
        None. (Lock held.)"""
        step = self._client.step
        if self._unwound != (step, "backward"):
            return None
        why = FAILED_OOM if self._oom_at == (step, "backward") else FAILED_ERROR
        self._failed_bw = (step, why)
        return why
