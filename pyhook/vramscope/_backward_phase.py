"""The backward phase of the Watcher: the global wrapper's begin and end
calls and the output-grad fallback (docs/hook.md). Mixed into
:class:`_watch.Watcher`; its every-step path ends and begins phases with
one ``Client.put`` call each, which makes the read (docs/hook.md, "Cost")."""

from time import monotonic as _monotonic

from . import _safe
from ._backward import _local as _bw_local, _state as _bw_state
from ._tracebacks import passed_through as _passed_through
from ._forward_phase import EVAL
from ._schedule import FIRST_MEASURED


class BackwardMixin:
    """Backward methods of the Watcher (which defines ``_begin``, ``_end``,
    ``_finish_step`` and the state they use)."""

    # ---- backward -----------------------------------------------------------------------

    def user_backward_begin(self):
        """Called by the global backward wrapper at the start of a user's backward;
        returns True when it is this model's (a training forward since the last one)."""
        _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        client = self._client
        if not self._active or self._in_backward:
            return False
        with self._lock:
            if self._in_backward:
                return False
            self._fast = False
            owner = client.owner
            if owner is not self._self_ref and owner is not None:
                owner = owner()
                if owner is not None and owner._open in ("forward", "loss"):
                    return False  # another watch's forward made this loss
            if self._open is EVAL and not self._eval_trains and not self._eval_probe \
                    and not getattr(self._model(), "training", True):
                # A backward after forwards of the model in eval mode taken
                # as an evaluation, none of them a probe (an attack's, whose
                # backward is its own): the model trains in eval mode (from
                # here on, such forwards are training ones), and the last
                # forward was this backward's.
                self._eval_trains = True
                self._trained = True
            if not (self._trained or self._open in ("forward", "loss")):
                if self._bw_step != client.step:
                    return False
                # A second backward with no forward since this watch's last
                # one (a retained graph): the same micro-step, in this step.
                if client.micro > 0 and self._open is None:
                    client.micro -= 1
            self._bw_step = client.step
            self._in_backward = True
            self._user_bw = True
            self._hook_output = False  # backwards come through the wrapper
            if self._eval_trains and getattr(self._model(), "training", True):
                self._eval_trains = False  # it trains in train mode
            # _backward_begin()'s work, with _begin's every-step path
            # copy of _activity()
            if self._step_called and not self._closure_depth and not self._in_update_method():
                self._finish_step()
            if self._unseen is not None:
                self._close_unseen()
            self._idle = False
            acts = self._acts
            if acts.measuring:
                acts.collect()
            self._trained = False
            # The every-step case, the loss open: its end (read on a
            # breakdown step) and backward's begin in one client call.
            if self._open != "loss" or self._tail_step is not None:
                self._begin("backward")
                return True
            self._backward_micro = client.micro
            # copy of _switch("loss", "backward", self._edge_reads)
            self._open = "backward"
            self._client.switch("loss", "backward", self._edge_reads)
            return True

    def user_backward(self, original, rest, *args, **kwargs):
        """``torch.autograd.backward`` as ``_backward`` calls it for this
        watch (directly while it is the only one; else from the wrapper,
        when its step is at rest): a backward whose loss is of a fast
        forward, its step at rest, ends the loss, runs (``original``) and
        ends, in this one frame. Any other backward goes to the wrapper's
        general path (``rest``). Returns what the backward returns; its
        errors propagate, this frame out of their traceback."""
        t = _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        client = self._client
        last = self._open
        local = _bw_local
        # Its loss open, or nothing open after a training forward (a
        # zero_grad between them, as Lightning's closure has) where this is
        # the only watch (user_backward_begin asks each in turn) and no
        # step() is left to finish (_activity); not inside another backward.
        if local.depth or not (self._fast and (
                last == "loss" or last is None and self._trained
                and not (self._step_called and not self._closure_depth)
                and len(_bw_state["listeners"]) == 1)):
            try:
                if self._fast and last == "backward" and self._user_bw and not local.depth \
                        and len(_bw_state["listeners"]) == 1:
                    # The backward a framework's callback began, in a step at
                    # rest: no watch takes it (user_backward_begin and
                    # unclaimed_backward see it in backward), and the only
                    # one's callback ends it.
                    local.depth = 1
                    try:
                        return original(*args, **kwargs)
                    finally:
                        local.depth = 0
                return rest(args, kwargs)
            except BaseException as exc:
                _passed_through(exc)
                raise
        self._bw_step = client.step
        self._in_backward = True
        self._user_bw = True
        self._trained = False
        self._backward_micro = client.micro
        self._open = "backward"
        # Client.switch's tuple, queued as _fast allows
        client._queue.append((t, last, "backward", client.step, client.micro, None,
                              client.model))
        if self._acts.measuring:
            self._acts.collect()
        local.depth = 1
        try:
            # loss.backward() (the usual call) without building its arguments
            return original(args[0]) if len(args) == 1 and not kwargs \
                else original(*args, **kwargs)
        except BaseException as exc:
            _safe.call(self.unwound)
            _passed_through(exc)
            raise
        finally:
            local.depth = 0
            t = _monotonic()
            if self._fast and self._open == "backward" and self._user_bw:
                # The backward's end
                self._open = None
                micro = self._backward_micro
                client._queue.append((t, "backward", None, client.step, micro, None,
                                      client.model))
                client.micro = micro + 1
                if self._optimizer is None:
                    self._ends_at_forward = client.step
                self._in_backward = False
                self._user_bw = False
            else:  # the backward left the rest state (a remove() from another thread)
                try:
                    self.user_backward_end()
                except Exception as exc:  # noqa: BLE001
                    _safe.report(exc)

    def user_backward_end(self):
        """Called by the global backward wrapper when that backward returned or raised."""
        _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        with self._lock:
            if self._user_bw:
                failed = self._backward_failed() if self._open == "backward" else None
                if failed is not None:
                    self._end("backward", closing=True, failed=failed)
                elif self._open == "backward":  # _end("backward")'s every-step case
                    self._open = None
                    client = self._client
                    micro = self._backward_micro
                    if micro == client.micro:
                        client.switch("backward", None, self._edge_reads)
                    else:
                        client.put("backward", None, None, self._edge_reads, micro)
                    client.micro = micro + 1
                    if self._optimizer is None:
                        self._ends_at_forward = client.step
                self._in_backward = False
                self._user_bw = False

    def unwound(self):
        """An error left ``backward()`` (the global wrapper's except): keep the
        phase then open, so an out-of-memory report made after the wrapper
        closed it still names it."""
        self._unwound = (self._client.step, self._open)
        self._fast = False  # its end takes user_backward_end (_backward_failed)

    def failing_phase(self):
        """The phase in progress, else the one an error left at this step."""
        if self._open is not None:
            return self._open
        step, phase = self._unwound
        return phase if step == self._client.step else None

    def failing_step(self):
        """The step of the phase failing_phase names: an open evaluation's
        own (one between steps is the step's it follows), else the step in
        progress."""
        return self._eval_step if self._open is EVAL else self._client.step

    def _on_output_grad(self, grad):
        # Fallback: autograd reached the model output of a backward that did not
        # enter through the wrapper (torch.autograd.grad, a C++ caller).
        if not self._active or self._in_backward:
            return None
        # A gradient through the model that takes none of its parameters is
        # a backward only as an attack's pass's, to its input, building no
        # graph (create_graph: a gradient penalty's, in the loss).
        if (self._grad_enabled() or self._perturbed_at != (self._client.step, self._client.micro)) \
                and not self._reaches_parameters():
            return None
        with self._lock:
            if self._in_backward:
                return None
            owner = self._client.owner
            owner = owner() if owner is not None else None
            if owner is not self and owner is not None and owner._in_backward:
                return None  # another watch's backward reached this model's output
            self._in_backward = True
            try:
                self._backward_begin()
                if self._queue_callback is not None:
                    self._queue_callback(self._done_callback)
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        return None

    def _reaches_parameters(self):
        """From inside the engine: whether this run takes a gradient of one
        of the model's parameters (accumulates it, or returns it to
        ``torch.autograd.grad``), so that it is a backward of the model,
        not a gradient of something else through it: a WGAN-GP's gradient
        penalty (of the critic's input), an attack's (of the input). True
        where torch cannot tell (``_will_engine_execute_node``, torch 1.13
        and 2.x). Asked only on the fallback's path."""
        will = getattr(getattr(self._torch, "_C", None), "_will_engine_execute_node", None)
        model = self._model()
        if will is None or model is None:
            return True
        try:
            with self._torch.enable_grad():
                for p in model.parameters():
                    if p.requires_grad:
                        # the parameter's AccumulateGrad node, behind a view of it
                        fn = p.view_as(p).grad_fn
                        if fn is None or will(fn.next_functions[0][0]):
                            return True
            return False
        except Exception:  # noqa: BLE001 - not told: taken as the model's backward
            return True

    def _backward_begin(self):
        # copy of _activity()
        if self._step_called and not self._closure_depth and not self._in_update_method():
            self._finish_step()
        if self._unseen is not None:
            self._close_unseen()
        self._idle = False
        if self._acts.measuring:
            self._acts.collect()
        self._trained = False
        self._bw_step = self._client.step
        self._begin("backward")

    def _on_backward_done(self):
        try:
            with self._lock:
                if not self._user_bw:
                    self._end("backward")
                    if self._optimizer is None:
                        self._ends_at_forward = self._client.step
                    self._in_backward = False
        except Exception as exc:  # noqa: BLE001 - raising here would fail backward()
            _safe.report(exc)
