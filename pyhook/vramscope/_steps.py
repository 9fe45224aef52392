"""Optimizer steps, closures, the end of a step and the entry points of the
framework callbacks: the half of the Watcher that decides where a step ends
(docs/hook.md, docs/integrations.md). Mixed into :class:`_watch.Watcher`."""

import sys
from time import monotonic as _monotonic

from . import _anatomy, _patch, _safe
from ._tracebacks import hook_code, passed_through as _passed_through


def user_frames(frame):
    """``(id, code, line, instruction)`` of ``frame`` and each of its
    callers, innermost first, the hook's own frames left out (no frame
    object is kept); the instruction is the call's offset in the code."""
    out = []
    while frame is not None:
        code = frame.f_code
        if not hook_code(code):
            out.append((id(frame), code, frame.f_lineno, frame.f_lasti))
        frame = frame.f_back
    return out


def zero_follows_step(step_frames, zero_frames):
    """Whether a zero_grad, called between steps, was written after
    ``optimizer.step()`` in the loop (docs/hook.md, "zero_grad after the
    update"). Both stacks are walked from the outermost frame down to where
    they part. Parting inside one frame (same frame, other call): the
    zero_grad's line there is after the step's (it ends the step) or before
    it (it heads the next one); on one line (``for b in data: opt.zero_grad();
    ...; opt.step()``), its call's offset in the code. Parting below a call
    both went through (a new call of the per-step function): it heads the
    next step. A frame is matched only under matching parents, so a dead
    frame whose id a new one reuses is never taken for it. Nothing to go
    by: after, so that no step is ever made of a lone zero_grad."""
    a, b = step_frames[::-1], zero_frames[::-1]
    for depth, ((sid, scode, sline, sat), (zid, zcode, zline, zat)) in enumerate(zip(a, b)):
        if sid != zid or scode is not zcode:
            return depth == 0  # no frame in common (another thread): after
        if sline != zline:
            return zline > sline
        if sat != zat:
            return zat > sat
    return True


def inherits_zero_grad(wrapper, opt):
    """Whether ``wrapper`` (around ``opt``) runs the optimizer class's own
    ``zero_grad`` on itself, so a patch on ``opt`` never sees it: Lightning's
    ``LightningOptimizer`` subclasses the optimizer's class and defines no
    ``zero_grad``. A wrapper with its own (accelerate's, which skips
    non-sync steps) is left alone."""
    if wrapper is None or "zero_grad" in getattr(wrapper, "__dict__", {"zero_grad": 0}):
        return False
    own = getattr(type(opt), "zero_grad", None)
    return own is not None and getattr(type(wrapper), "zero_grad", None) is own


def method_codes(optimizers):
    """The code objects of the functions the classes of ``optimizers``
    define, past decorators (``__wrapped__``: SAM's ``@torch.no_grad()``),
    other than torch's own classes' (whose methods zero no gradients
    mid-update)."""
    codes = set()
    for opt in optimizers:
        for cls in type(opt).__mro__:
            if (getattr(cls, "__module__", None) or "").split(".")[0] in ("torch", "builtins"):
                continue
            for fn in list(vars(cls).values()):
                fn = getattr(fn, "__func__", fn)  # a staticmethod or classmethod
                for _ in range(4):
                    code = getattr(fn, "__code__", None)
                    if code is not None:
                        codes.add(code)
                        break
                    fn = getattr(fn, "__wrapped__", None)
                    if fn is None:
                        break
    return frozenset(codes)


class StepsMixin:
    """Step, closure and framework methods of the Watcher (which defines
    ``_begin``, ``_end``, ``_activity``, ``_recover`` and the state they use)."""

    # ---- step ----------------------------------------------------------------------------

    def _in_update_method(self, depth=10):
        """Whether one of the caller's few callers runs a method of the
        watched optimizer's class, or of an optimizer it holds, that is not
        torch's own: an update in more than one call between forward and
        backward passes, which zeroes the gradients itself in between
        (SAM's ``first_step(zero_grad=True)``, alone or inside its
        ``step(closure)``). Inside it nothing ends the step: a zero_grad is
        a phase of it, not the end of one that skipped its update or the
        head of the next."""
        codes = self._update_codes
        if not codes:  # torch's own optimizers: none
            return False
        frame = sys._getframe(2)
        while frame is not None and depth > 0:
            if frame.f_code in codes:
                return True
            frame, depth = frame.f_back, depth - 1
        return False

    # torch 2.x wraps the step() of each optimizer class that has instances
    # (Optimizer._patch_step_function): a subclass whose step() calls
    # super().step() runs the step hooks twice, nested. Only the outer pair
    # counts; _step_depth is reset whenever a step is finished. A step()
    # that raised (no post hook) leaves it counted: the next zero_grad or
    # training forward ends that step as failed (_failed_steps).
    _step_depth = 0

    def _on_step_pre_hook(self, optimizer, args, kwargs):
        t = _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        if self._step_depth:
            self._step_depth += 1
            return None
        # step() or step(None), as accelerate's optimizer wrapper calls it
        # (the hook gets the optimizer itself as args[0]): no closure
        if self._fast and not kwargs and args and args[0] is self._optimizer() \
                and (len(args) == 1 or len(args) == 2 and args[1] is None):
            if self._open is None and not self.framework_steps:
                # the fast path of step() at rest, as _step_around has it
                self._idle = False
                self._step_called = True
                self._open = "step"
                c = self._client  # Client.switch's tuple, queued as _fast allows
                c._queue.append((t, None, "step", c.step, c.micro, None, c.model))
                self._step_depth = 1
                return None
            if self._open == "step" and self.framework_steps:
                # The step a framework's callback opened (framework_phase's
                # fast path): _step_pre's work at rest, no closure to wrap.
                self._idle = False
                self._step_called = True
                self._step_depth = 1
                return None
        if self._fast and len(args) == 1 and len(kwargs) == 1 and args[0] is self._optimizer() \
                and (self._open == "forward" or self._open is None) and not self._step_called:
            # step(closure=...) in a step at rest, as Lightning calls it
            # (its callback began forward, or nothing is open without it):
            # _step_pre's work, the closure wrapped to take the fast paths
            # on its return.
            closure = kwargs.get("closure")
            if closure is not None:
                self._idle = False
                self._step_called = True
                self._step_depth = 1
                return args, {"closure": self._wrap_closure(closure)}
        if self._held and optimizer is not self._optimizer() and self._open == "step" \
                and self._step_called and not self.framework_steps:
            # A held optimizer's step() inside the watched one's step()
            # through its patch (_step_around, which keeps no depth): part
            # of its update, as _step_around counts it.
            self._step_depth = 2
            return None
        try:
            new = self._step_pre(args, kwargs, optimizer)  # may finish the last step (depth 0)
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            return None
        finally:
            self._step_depth = 1
        return None if new[0] is args and new[1] is kwargs else new

    def _step_around(self, patched, *args, **kwargs):
        """``optimizer.step()`` through the patch (an optimizer without step
        hooks: torch 1.13), its entry, ``patched`` the method: the step's
        begin, the call and its end in one frame, as :meth:`_zero_grad` is
        for zero_grad. The hook's own errors are reported; the call's
        propagate, this frame out of their traceback."""
        t = _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        on = patched.on  # False: undone, and left in place under another's wrapper
        if on and self._fast and not args and not kwargs and self._open is None \
                and not self.framework_steps:
            # The fast path (no lock): step() with no closure in a step at
            # rest (torch >= 2.0's step hook takes its own, with the
            # optimizer as args[0]); its end is _step_post's fast path.
            self._idle = False
            self._step_called = True
            self._open = "step"
            c = self._client  # Client.switch's tuple, queued as _fast allows
            c._queue.append((t, None, "step", c.step, c.micro, None, c.model))
        elif not on or self._held and self._open == "step" and self._step_called \
                and not self.framework_steps:
            # Undone: the call alone. A held optimizer's step() inside the
            # watched one's (which _step_post ends as it returns): part of
            # its update, as torch 2.x's step hooks count it (_step_depth).
            try:
                return patched.call(args, kwargs)
            except BaseException as exc:
                _passed_through(exc)
                raise
        else:
            try:
                args, kwargs = self._step_pre(args, kwargs, patched.ref())
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        try:
            # step() called bare (the usual call) without building its arguments
            return patched.func(patched.ref(), *args, **kwargs) if args or kwargs \
                else patched.func(patched.ref())
        except BaseException as exc:
            # It raised: the step stays open with its depth counted, as torch
            # 2.x's step hooks leave it (no post hook), and the next
            # zero_grad or training forward ends it as failed, or the
            # process dies in it (_failed_steps).
            self._step_depth = 1
            self._fast = False
            _passed_through(exc)
            raise
        finally:
            try:
                if self._fast:  # _step_post's fast path, a frame less
                    self._finish_step()
                elif not self._step_depth:
                    self._step_post(patched.ref())
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)

    def _step_pre(self, args, kwargs, opt=None):
        """Begin ``step``, or, for ``step(closure)``, wrap the closure so its
        phases show as themselves and ``step`` begins when it returns.
        ``opt``: the optimizer stepping (None: not known)."""
        _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        if not self._active:
            return args, kwargs
        with self._lock:
            self._fast = False
            # (_stepped is empty but inside a split update: no frame for any other)
            if not self._stepped or not self._joins_update(opt):
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
            self._step_called = True
            # step() with no arguments (the patch on torch 1.13) has no closure.
            where, closure = _patch.find_closure(args, kwargs) if args or kwargs \
                else (None, None)
            if closure is None:
                last = self._open
                if last is None:  # _begin("step") with no end to read
                    # copy of _open_first("step", None)
                    if self._client.owner is not self._self_ref:
                        self._take_over()
                    self._open = "step"
                    self._client.switch(None, "step", False, None)
                elif last != "step":  # a framework may have opened it
                    self._begin("step")
                return args, kwargs
            return _patch.replace_closure(args, kwargs, where, self._wrap_closure(closure))

    def _wrap_closure(self, closure):
        def closure_watched(*a, **k):
            self._closure_depth += 1
            ok = False
            try:
                out = closure(*a, **k)
                ok = True
                return out
            finally:
                self._closure_depth -= 1
                last = self._open
                if ok and self._fast and (last == "step" or last is None):
                    # _closure_done at rest (no lock): nothing left to recover
                    # but a meter the closure's forward installed; the step
                    # begins unless the framework's callback began it.
                    meter = self._acts.meter
                    if meter is not None and meter.active:
                        meter.stop()
                    if last is None:
                        self._open = "step"
                        c = self._client  # Client.switch's tuple, queued as _fast allows
                        c._queue.append((_monotonic(), None, "step", c.step, c.micro, None,
                                         c.model))
                elif ok and self._active:
                    self._guarded(self._closure_done)

        return closure_watched

    def _closure_done(self):
        with self._lock:
            self._fast = False
            self._recover()
            if self._open != "step":
                self._begin("step")  # the parameter update follows the closure

    def _on_step_post_hook(self, optimizer, args, kwargs):
        _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        depth = self._step_depth
        if depth > 1:
            self._step_depth = depth - 1
            return
        self._step_depth = 0
        try:  # _guarded and _step_post's fast path inlined: frames less each step
            if not self._fast:
                self._step_post(optimizer)
            elif self.framework_steps:
                self._framework_step_end()
            else:
                self._finish_step()
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)

    def _framework_step_end(self):
        """The end of a fast step's update under a framework's steps (no
        lock): _step_post's framework case, ``step`` ending with the step's
        closing read, as _finish_step's every-step case makes it (exact
        peaks); the framework's callback ends the step itself."""
        self._step_called = False
        self._updated = True
        if self._open == "step" and self._tail_step is None and self._exact:
            self._open = None
            self._close_read()
            return
        with self._lock:
            self._fast = False
            self._end("step")

    def _step_post(self, opt=None):
        """The end of ``opt``'s step() (None: not known): the step's end,
        but for a part of a split update before its last."""
        _monotonic()  # first: dynamo breaks the graph here (docs/hook.md, "Compiled models")
        if self._fast:  # a fast step's end (no lock: docs/hook.md, "A step at rest")
            self._finish_step()
            return
        if not self._active:
            return
        with self._lock:
            if self.framework_steps:
                self._step_called = False
                self._updated = True
                self._end("step")
                return
            if self._others and not self._update_done(opt):
                return  # the step stays open for the update's other optimizers
            self._finish_step()

    # ---- a model split between optimizers (watch(model, [muon, adamw])) -------------------

    def _members(self):
        """The ids of the update's optimizers alive: the watched one and the others."""
        return {id(o) for o in self.optimizers()}

    def _joins_update(self, opt):
        """Whether ``opt``'s step() continues the step's update, which
        another of its optimizers began: one that has not stepped in it
        yet. One that has (after one that skipped its update, as a
        mixed-precision scaler skips it on an overflow) begins the next
        step."""
        stepped = self._stepped
        return bool(stepped) and opt is not None and id(opt) not in stepped \
            and id(opt) in self._members()

    def _mid_update(self):
        """Whether a zero_grad now falls inside the step's update, between
        its optimizers' steps (``for opt in opts: opt.step();
        opt.zero_grad()``): some have stepped, not all, and the loop is not
        known to zero before its forward, where such a zero_grad heads the
        next step after one that skipped its update. (Lock held.)"""
        return bool(self._stepped) and self._zero_after is not False

    def _update_done(self, opt):
        """Note that ``opt``'s step() ended; whether every optimizer of the
        update has now stepped (an unknown ``opt``, or one of none of them,
        ends it). (Lock held.)"""
        members = self._members()
        if opt is None or id(opt) not in members:
            return True
        self._stepped.add(id(opt))
        return members <= self._stepped

    def finish_update(self):
        """The process exits inside a split update: some of its optimizers
        stepped and the others never will (a scaler skipped their last
        update). The step ends here, as the next step's first phase would
        have ended it, not left open for the monitor to read as a process
        that died mid-step. Any thread; never waits for the lock."""
        if not self._stepped or not self._lock.acquire(False):
            return
        try:
            if self._active and self._stepped and self._open == "step":
                self._fast = False
                self._finish_step()
        except Exception as exc:  # noqa: BLE001 - at exit: never raise
            _safe.report(exc)
        finally:
            self._lock.release()

    def finish_open_step(self):
        """End a step the optimizer never finished: ``step`` was opened (by a
        framework, or a step hook whose step raised) but no post hook ran, as when
        a mixed-precision scaler skips ``optimizer.step()`` (Lightning's
        ``on_train_batch_end``). No-op otherwise."""
        try:
            if self._fast and self._open is None and not self._step_called:
                return  # a step at rest, ended by the step hook (no lock)
            if not self._active:
                return
            with self._lock:
                self._fast = False
                if self._open == "step" or self._step_called:
                    self._finish_step()
        except Exception as exc:  # noqa: BLE001 - a framework's callback calls it: never raise
            _safe.report(exc)

    def finish_step(self):
        """End the step now (HF Trainer's ``on_step_end``); no-op when idle."""
        try:
            if self._fast and not self._idle and self._open is None:
                self._finish_step()  # a step whose every phase took its fast path (no lock)
                return
            if not self._active:
                return
            with self._lock:
                self._fast = False
                if not self._idle or self._step_called:
                    self._finish_step()
        except Exception as exc:  # noqa: BLE001 - a framework's callback calls it: never raise
            _safe.report(exc)

    def _finish_step(self):
        self._step_called = False
        self._step_depth = 0
        self._updated = False
        client = self._client
        last = self._open
        if last == "step" and self._tail_step is None:
            # _end("step")'s every-step case: the step's closing read, and
            # with exact peaks its plan (docs/protocol.md, "Exact peaks").
            self._open = None
            if self._fast:
                self._close_read()
            else:
                client.switch("step", None, True, None, self._step_plan)
        elif last is not None:
            self._end(last, closing=True)
        step = client.step
        acts = self._acts
        # Activations.finish's own test, inlined for the common step: nothing
        # measured, and no measurement to scale or no new input size.
        if acts.measuring or acts.scheduled or (
                acts.measured is not None and (acts.batch, acts.tokens) != acts.sent):
            figures = acts.finish(step)
            if figures is not None:
                try:  # _safe.call inlined: a frame less each measured step
                    self._send_anatomy(step, figures)
                except Exception as exc:  # noqa: BLE001
                    _safe.report(exc)
            if self._census_want is not None:  # armed through acts.scheduled
                _safe.call(self._census_at_step_end, step)
        nxt = step + 1
        client.step = nxt
        client.micro = 0
        self._zero_seen_last = self._zero_seen
        self._zero_seen = False
        self._idle = True
        if self._trained:
            # A training forward that no wrapped backward followed (a loop
            # calling torch.autograd.grad): hook the outputs again.
            self._hook_output = True
            self._fast = False
        self._trained = False
        # Whether the schedule measures the next step (its activations) and
        # whether it reads its phases (a breakdown step, never a measured
        # one past the first three): asked only from the step it names on.
        if nxt >= self._due:  # the first step of this watcher ends here too
            due, breakdown, self._due = acts.schedule(nxt)
            if self._step_frames is None:
                # Where this watcher's first step ended (once): a zero_grad
                # between steps is placed by it (Watcher._zero_shape).
                self._step_frames = user_frames(sys._getframe(1))
        else:
            due = breakdown = False
        if self._exact:  # the next step reads its phases, or only where it closes
            self._edge_reads = breakdown or self._moved or self.breakdown_always
        if due or acts.scheduled or acts.measuring:
            acts.prepare(nxt)
        else:
            # Activations.prepare's common case inlined: a step that was neither
            # scheduled nor measured left nothing to reset but its input size.
            acts.batch = acts.tokens = None
        # The next step takes the fast paths when it reads only where it
        # closes and the loop is at rest: nothing open, nested, skipped or
        # owed (docs/hook.md, "Cost"); a measured step too, whose fast paths
        # make the meter's calls. Under a framework's steps (framework_steps)
        # only its forwards and backwards do: its callbacks open and end the
        # step, under the lock, and the step hooks then take theirs. A step
        # that took them all left the loop at rest: only its reads are to
        # decide. Its fast paths queue without Client.switch's tests: the
        # step starts with the queue short and the client open (a closed
        # one's hold is -1), and adds one step's edges at most; and without
        # asking whose phases the client's edges are: only the owner's step
        # takes them (another watch's _take_over clears this one's _fast).
        if self._fast:
            self._fast = not self._edge_reads and len(client._queue) < client._hold \
                and client.owner is self._self_ref
            return
        if self._others:
            self._stepped.clear()  # the next update's steps begin
        if self._unseen_backward:
            # A backward no watch claimed in a step of this watch's own that
            # had none it claimed: the loop calls the model's children.
            self._unseen_backward = False
            if self._bw_step != step:
                self._hook_children()
        meter = acts.meter
        self._fast = self._fast_loop and not self._edge_reads and self._active \
            and self._open is None and self._tail_step is None and not self._depth \
            and not self._zero_depth and not self._closure_depth \
            and not self._in_backward and not self._user_bw and not self._skip_forward \
            and not self._quiet and not self._hook_output and self._kw_patch is None \
            and not self._in_training_step \
            and self._census_want is None and (meter is None or not meter.active) \
            and self._unseen is None \
            and len(client._queue) < client._hold and client.owner is self._self_ref

    def _send_anatomy(self, step, acts):
        # acts: Activations.finish's fields, every key there but "saved" on
        # a scaled message
        a = self._acts
        # Every message counts at its own step: a measured step from the
        # tensors its meter listed, any other through the caches, which
        # answer without a walk while nothing changed.
        meter = a.meter if a.measuring else None
        figures = _anatomy.static_figures(
            self._torch, self._model(), self._optimizers(), self._figure_cache,
            getattr(meter, "tensors", None), getattr(meter, "weights", None))
        batch = self._config.batch_size
        self._client.anatomy(step, {
            "weights": figures["weights"],
            "gradients": figures["gradients"],
            "optimizer": figures["optimizer"],
            "activations": acts["activations"],
            "batch_size": acts["batch"] if batch is None else batch,
            "params": figures["params"],
            "device": figures["device"],
            "model": self.name,
            "tokens": acts["tokens"],
            "activations_step": acts["activations_step"],
            "activations_batch": acts["activations_batch"],
            "activations_tokens": acts["activations_tokens"],
            "activations_source": acts["activations_source"],
            "saved": acts.get("saved"),
        })

    # ---- framework integrations (integrations/) -------------------------------------------

    _wrappers_checked = False

    def _watch_lightning_optimizers(self):
        """Lightning's ``LightningOptimizer`` (what ``self.optimizers()``
        returns) is an instance of a subclass of the optimizer's own class: its
        ``zero_grad()`` is the class's, run on the wrapper, so the patch on the
        optimizer instance never sees manual optimization's ``opt.zero_grad()``.
        Found on Lightning 2.6. The wrapper around the watched optimizer gets the
        same patch, once, at the first ``training_step`` (when the Trainer has
        made it). (Lock held.)"""
        self._wrappers_checked = True
        opt = self.optimizer
        strategy = getattr(getattr(self._model(), "_trainer", None), "strategy", None)
        if opt is None or strategy is None:
            return
        for w in list(getattr(strategy, "_lightning_optimizers", None) or ()):
            if getattr(w, "_optimizer", None) is opt and inherits_zero_grad(w, opt):
                self._undo.append(_patch.patch_method(w, "zero_grad", None, None,
                                                      entry=self._zero_grad))

    def framework_phase(self, name, batch=None):
        """Begin ``name`` from a framework callback; no-op when it is already open.

        ``batch`` (forward only) is the framework's batch object, read for its size.
        """
        try:
            if self._fast \
                    and not (self._step_called and not self._closure_depth):
                # The fast paths (no lock) of a step at rest: the phases a
                # framework's callbacks begin (Lightning's, transformers'
                # on_pre_optimizer_step), as the general path below begins
                # them with nothing read (_activity finishes nothing here).
                t = _monotonic()
                last = self._open
                c = self._client  # Client.switch's tuple, queued as _fast allows
                if last is None and name == "step":
                    self._idle = False
                    self._open = "step"
                    c._queue.append((t, None, "step", c.step, c.micro, None, c.model))
                    return
                x = _patch.lead_tensor(batch, self._tensor_type) \
                    if last is None and name == "forward" else None
                if x is not None:
                    # a batch that leads with a tensor: its size, reused
                    # while shaped as the last training input
                    if x.shape == self._last_shape and x.dtype is self._last_dtype:
                        size, extra = self._last_size
                    else:  # a new shape (dynamic padding: most steps)
                        size = self._input_size(x)
                        extra = self._last_size[1]
                    self._idle = False
                    self._trained = True
                    self._open = "forward"
                    c._queue.append((t, None, "forward", c.step, c.micro, extra, c.model))
                    self._acts.note_input(size)
                    return
                if last == "loss" and name == "zero_grad" and self._tail_step is None:
                    self._idle = False
                    self._open = "zero_grad"
                    c._queue.append((t, "loss", "zero_grad", c.step, c.micro, None, c.model))
                    return
                if name == "backward" and not self._in_backward and self._tail_step is None \
                        and (last is None or last == "loss"):
                    self._in_backward = True
                    self._user_bw = True  # ended by framework_end("backward")
                    self._idle = False
                    acts = self._acts
                    if acts.measuring:
                        acts.collect()
                    self._trained = False
                    self._bw_step = c.step
                    self._backward_micro = c.micro
                    self._open = "backward"
                    c._queue.append((t, last, "backward", c.step, c.micro, None, c.model))
                    return
            if not self._active:
                return
            with self._lock:
                self._fast = False
                if self._open == name:
                    return
                if name == "backward":
                    if not self._in_backward:
                        self._in_backward = True
                        self._user_bw = True  # ended by framework_end("backward")
                        # The framework announces its backwards: no forward
                        # output need be hooked for one (_on_output_grad).
                        self._hook_output = False
                        self._backward_begin()
                    return
                self._activity()
                if name == "forward":
                    size = None if batch is None else self._batch_size(batch, (batch,), None)
                    self._trained = True
                    self._begin("forward", input=size)
                    if size is not None:
                        self._note_input(size)
                else:
                    self._begin(name)
        except Exception as exc:  # noqa: BLE001 - a framework's callback calls it: never raise
            _safe.report(exc)

    def framework_end(self, name):
        """End ``name`` from a framework callback when it is the open phase."""
        try:
            if self._fast:
                last = self._open
                if last != name:
                    return  # nothing to end in a step at rest (the step hook ended it)
                if last == "backward" and self._user_bw and self._tail_step is None:
                    # The fast path (no lock): the end of the backward
                    # framework_phase began, _end("backward") with nothing read.
                    t = _monotonic()
                    self._open = None
                    self._in_backward = False
                    self._user_bw = False
                    c = self._client  # Client.switch's tuple, queued as _fast allows
                    micro = self._backward_micro
                    c._queue.append((t, "backward", None, c.step, micro, None, c.model))
                    c.micro = micro + 1
                    return
            if not self._active:
                return
            with self._lock:
                self._fast = False
                if name == "step" and self._open == "step" and self.framework_steps:
                    self._updated = True
                self._end(name)
        except Exception as exc:  # noqa: BLE001 - a framework's callback calls it: never raise
            _safe.report(exc)
