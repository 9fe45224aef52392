"""The forward phase of the Watcher: the model's forward pre and post hooks
and torch 1.13's peek at keyword inputs (docs/hook.md, "Phase detection";
their fast paths, docs/hook.md "Cost"). Mixed into :class:`_watch.Watcher`."""

import sys
from time import monotonic as _monotonic

from . import _patch, _safe
from ._meter import in_compiled_call

# The user phase an evaluation makes (Watcher._eval, _eval_in_step): the
# monitor's name for evaluation (session.EvalPhase).
EVAL = "eval"


class ForwardMixin:
    """Forward methods of the Watcher (which defines ``_begin``, ``_end``,
    ``_finish_step`` and the state they use)."""

    # Registered with with_kwargs=True where pre-hooks take kwargs (torch >= 2.0)
    # and plain on torch 1.13; it returns None either way. The body of the
    # training forward's begin is inlined (docs/hook.md, "Cost": every frame
    # on this path runs at every forward).
    def _on_forward_pre(self, module, args, kwargs=None):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        t = _monotonic()  # dynamo breaks the graph here, where it may
        # The fast path (no lock: docs/hook.md, "Threads"): a training
        # forward of a step at rest, its first tensor input (whose size it
        # reuses when shaped as the last one): the first positional argument,
        # or with none the first keyword one (model(**batch), where the hook
        # gets keyword inputs: torch >= 2.0), wanting no gradient (a probe's
        # or an attack's does: _note_perturbed). While _fast holds, only the
        # fast paths and user_backward_end have run since the step began,
        # and they leave nothing nested, in backward or in step() where no
        # phase is open; _fast holds only while the watch is active. In a
        # training_step (self(x)) the framework's callback began forward.
        last = self._open
        if self._fast and module is self._model() and (
                last is None or last == "forward" and self._in_training_step and not self._depth) \
                and (module.training or self._eval_trains or not self._idle) \
                and self._grad_enabled() and not self._tracing():
            x = args[0] if args else (next(iter(kwargs.values())) if kwargs else None)
            if isinstance(x, self._tensor_type) and not x.requires_grad:
                if x.shape == self._last_shape and x.dtype is self._last_dtype:
                    size, extra = self._last_size
                else:
                    # A new shape (dynamic padding: most steps): its size,
                    # kept for the steps that repeat it (_input_size).
                    size = _patch.size_of(x)
                    extra = {"input": size}
                    self._last_shape, self._last_dtype = x.shape, x.dtype
                    self._last_size = size, extra
                self._depth = 1
                self._idle = False
                self._trained = True
                if last is None:
                    self._open = "forward"
                    c = self._client  # Client.switch's tuple, queued as _fast allows
                    c._queue.append((t, None, "forward", c.step, c.micro, extra, c.model))
                acts = self._acts
                b, n = size["batch"], size["tokens"]
                if acts.batch is None and acts.tokens is None:
                    if acts.measured is None or acts.meter is None or (b, n) == acts.checked:
                        acts.batch, acts.tokens = b, n
                    else:
                        acts.note_input(size)
                elif b is None or b != acts.batch or n != acts.tokens:
                    acts.note_input(size)
                if acts.measuring:
                    acts.start()
                return None
        if not self._active or module is not self._model() or self._tracing():
            return None
        with self._lock:
            self._fast = False  # the general path may leave the rest (a measurement, an eval)
            if self._depth or self._step_depth or self._oom_at is not None \
                    or self._failed_bw is not None:
                self._close_failed(module)  # a step whose phase raised ends here
            if self._restart_due and self._grad_enabled():
                _safe.call(self._restart_peaks)
            depth = self._depth + 1
            self._depth = depth
            if depth > 1:
                return None
            if self._redirected and not self._in_training_step:
                self._redirected = False  # left by a training_step that raised
            if self._in_backward and (self._user_bw or self._queue_callback is not None):
                self._skip_forward = True  # recomputation inside backward (checkpointing)
                return None
            try:
                grad = self._grad_enabled()
                # the first input: positional, else the first keyword one
                x = (args[0] if args else (next(iter(kwargs.values())) if kwargs else None)) \
                    if grad else None
                probe = evaluating = False
                if grad and self._idle and not module.training:
                    # Its input's gradient is wanted (an adversarial attack, a
                    # saliency map): a probe, never a training forward.
                    probe = isinstance(x, self._tensor_type) and x.requires_grad
                    evaluating = probe or not self._eval_trains
                if not grad and (self._idle and self._optimizer is not None
                                 or self._ends_at_forward == self._client.step
                                 or self._open is EVAL
                                 or self._optimizer is not None and self._between_micro_steps()) \
                        or evaluating:
                    # Evaluation between steps: no training phase, no step, no
                    # batch; with an optimizer, a user phase "eval" of its own
                    # (_eval). The same between two micro-steps of a step
                    # (_eval_in_step), and inside an evaluation already open.
                    # With gradients enabled, a forward of the model in eval
                    # mode between steps, once a backward showed it trains in
                    # train mode, is one too (an evaluation loop without
                    # no_grad), and a probe always is.
                    self._quiet = True
                    self._eval_outside_phases()
                    if grad and self._open is EVAL:
                        if probe:  # whose backward is no training one
                            self._eval_probe = True
                        else:
                            self._eval_grad = True
                    return None
                size = extra = None
                if grad:
                    if self._ends_at_forward == self._client.step:
                        self._finish_step()  # no optimizer: a backward ended this step
                    # copy of _activity()
                    if self._step_called and not self._closure_depth \
                            and not self._in_update_method():
                        self._finish_step()
                    if self._unseen is not None:
                        self._close_unseen()
                    self._idle = False
                    if self._open is None and module.training and x is not None \
                            and getattr(x, "requires_grad", False):
                        self._note_perturbed(x)
                    if isinstance(x, self._tensor_type):
                        # _patch.input_size inlined for the common tensor first
                        # input (positional, else the first keyword one: what
                        # input_size finds first there too); the same shape as
                        # the last one reuses its (never mutated) size and
                        # message dicts.
                        shape = x.shape
                        dtype = x.dtype
                        if shape == self._last_shape and dtype is self._last_dtype:
                            size, extra = self._last_size
                        else:
                            # tokens only for integer index inputs (_patch.size_of)
                            size = _patch.size_of(x)
                            extra = {"input": size}
                            self._last_shape, self._last_dtype = shape, dtype
                            self._last_size = size, extra
                    else:
                        size = _patch.input_size(self._torch.is_tensor, args, kwargs)
                    if not self._wrapper_looked:
                        self._watch_wrapper()
                    if self._kw_patch is not None:  # torch 1.13's peek at keyword inputs
                        self._pending_kw = size is None
                        if size is not None:
                            self._kw_patch()  # positional inputs: no kwargs peek needed
                            self._kw_patch = None
                    self._trained = True
                last = self._open
                if last is None:  # _begin("forward", input=size) with no end to read
                    if extra is None and size is not None:
                        extra = {"input": size}
                    # copy of _open_first("forward", extra)
                    if self._client.owner is not self._self_ref:
                        self._take_over()
                    self._open = "forward"
                    self._client.switch(None, "forward", False, extra)
                elif last != "forward":  # training_step or a framework opened it
                    self._begin("forward", input=size)
                if grad:
                    acts = self._acts
                    if size is not None:
                        b, n = size["batch"], size["tokens"]
                        if acts.batch is None and acts.tokens is None and not acts.measuring \
                                and (acts.measured is None or acts.meter is None
                                     or (b, n) == acts.checked):
                            # Activations.note_input's common case inlined: the
                            # step's first forward, nothing to compare its size with
                            # (or compared before).
                            acts.batch, acts.tokens = b, n
                        elif b is None or b != acts.batch or n != acts.tokens:
                            # (the same size again in this step: nothing to note)
                            acts.note_input(size)
                    if acts.measuring:  # unmeasured steps make no meter call
                        acts.start()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        return None

    _on_forward_pre_kw = _on_forward_pre

    # (step, micro) of the last micro-step whose first forward, in train
    # mode, took a perturbed input (_perturbed): an attack's pass, when
    # its gradient goes to that input and no update follows.
    _perturbed_at = None

    def _note_perturbed(self, x):
        """The first forward of a micro-step, in train mode, on ``x``, an
        input that requires a gradient: note the micro-step when ``x`` is
        an adversarial attack's perturbed input (PGD in train mode): its
        backward, ``loss.backward()`` or ``torch.autograd.grad`` to the
        input, is a pass of the step that trains on the result
        (_skipped_update, _on_output_grad). (Lock held.)"""
        try:
            if _perturbed(x, self._torch.nn.Parameter):
                self._perturbed_at = (self._client.step, self._client.micro)
        except Exception as exc:  # noqa: BLE001 - an input not looked into: a training one
            _safe.report(exc)

    # Whether the first training forward looked for a wrapper that called the model
    _wrapper_looked = False

    def _watch_wrapper(self):
        """At the first training forward: the wrappers that called the model
        (_patch.calling_wrappers; DDP's around a model of the HF Trainer,
        which zeroes through it; Fabric's _FabricModule) get the model's
        zero_grad patch, undone with the others. Not under a compiled call
        (a model compiled after watch()), where dynamo compiles each frame
        the hook calls and cannot trace a frame's locals: it raises. (Lock
        held.)"""
        self._wrapper_looked = True
        try:
            frame = sys._getframe(2)  # the caller of the forward pre-hook
            if in_compiled_call(frame):
                return
            for w in _patch.calling_wrappers(frame, self._model(), self._torch.nn.Module):
                if "zero_grad" in w.__dict__:
                    continue
                self._undo.append(_patch.patch_method(w, "zero_grad", None, None,
                                                      entry=self._zero_grad, plain_set=True))
                # This step's zero_grad may have run through the wrapper
                # unseen: the step counts as having had one, and the first
                # zero_grad between steps is placed by where it is called,
                # as after auto-attach (started_mid_step).
                self._zero_seen = True
        except Exception as exc:  # noqa: BLE001 - the wrapper's zero_grad stays unseen
            _safe.report(exc)

    def _batch_size(self, batch, args, kwargs):
        """The size of a training step's input (_patch.input_size of
        ``args`` and ``kwargs``), through the cache when ``batch``, where
        input_size looks first, leads with a tensor (_patch.lead_tensor)."""
        x = _patch.lead_tensor(batch, self._tensor_type)
        if x is not None:
            return self._input_size(x)
        return _patch.input_size(self._torch.is_tensor, args, kwargs)

    def _input_size(self, t):
        """The size of training input ``t`` (_patch.size_of), through the
        cache of the last input's shape and dtype that the fast paths reuse
        (as _on_forward_pre's general path fills it)."""
        shape, dtype = t.shape, t.dtype
        if shape == self._last_shape and dtype is self._last_dtype:
            return self._last_size[0]
        size = _patch.size_of(t)
        self._last_shape, self._last_dtype = shape, dtype
        self._last_size = size, {"input": size}
        return size

    def _peek_kwargs(self, args, kwargs):
        # torch 1.13: the pre-hook (which ran first) saw only positional inputs.
        if kwargs and self._pending_kw and self._active:
            self._pending_kw = False
            size = _patch.input_size(self._torch.is_tensor, (), kwargs)
            if size is not None:
                with self._lock:
                    self._note_input(size)
                    self._acts.start()
        return args, kwargs

    _pending_kw = False

    def _note_input(self, size):
        self._acts.note_input(size)

    def _on_forward(self, module, args, output):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        t = _monotonic()  # dynamo breaks the graph here, where it may
        # The fast path (no lock): the end of a fast forward whose output is,
        # or holds at its first level (a ModelOutput's or a tuple's values),
        # a tensor that needs a gradient: forward ends and loss begins.
        if self._fast and module is self._model() and self._open == "forward" \
                and (output.requires_grad if isinstance(output, self._tensor_type)
                     else _patch.holds_grad_tensor(output, self._tensor_type)) \
                and self._grad_enabled():
            self._depth = 0
            self._open = "loss"
            c = self._client  # Client.switch's tuple, queued as _fast allows
            c._queue.append((t, "forward", "loss", c.step, c.micro, None, c.model))
            if self._acts.measuring:
                self._acts.forward_done()
            return None
        if not self._active or module is not self._model() or self._tracing():
            return None
        if self._redirected and not self._in_training_step:
            # the end of a strategy's call that ran training_step
            self._redirected = False
            return None
        with self._lock:
            self._fast = False
            depth = self._depth - 1
            if depth > 0:
                self._depth = depth
                return None
            self._depth = 0
            if self._skip_forward:
                self._skip_forward = False
                return None
            if self._quiet:
                self._quiet = False
                return None
            try:  # the forward's end, inlined
                acts = self._acts
                # The backward fallback's grad hook goes on the output (below)
                # until backwards come through the wrapper, and on an attack's
                # pass (_note_perturbed), whose gradient to its input may be
                # taken with torch.autograd.grad.
                hook = self._hook_output or self._perturbed_at is not None \
                    and self._perturbed_at == (self._client.step, self._client.micro)
                if acts.measuring:
                    if hook:
                        acts.pause()
                    else:
                        # What is saved until backward is the loss's: only
                        # once backwards come through the wrapper, which
                        # removes the saved-tensor hooks on this thread before
                        # autograd runs. Removed from inside the engine (the
                        # output-grad fallback), they would outlive it in this
                        # thread's state, which the engine restores after.
                        acts.forward_done()
                if not self._grad_enabled():
                    self._end("forward")
                    return None
                if isinstance(output, self._tensor_type):  # the common output, without the walk
                    if not output.requires_grad:
                        self._end("forward")
                        return None
                    if hook:
                        output.register_hook(self._grad_hook)
                else:
                    found = []
                    _patch.grad_tensors(self._torch, output, found)
                    if not found:
                        self._end("forward")
                        return None
                    if hook:
                        # The backward fallback (torch.autograd.grad, a C++ caller). Once
                        # the global wrapper has seen this loop's backwards it is skipped:
                        # register_hook and the engine's call cost ~8 us a step in torch.
                        hook = self._grad_hook
                        for t in found:
                            t.register_hook(hook)
                # Ends forward (read on a breakdown step) and begins loss with
                # that read: no user code between. Anything but an open
                # forward goes through _begin.
                if self._open != "forward" or self._tail_step is not None:
                    self._begin("loss")
                    return None
                # copy of _switch("forward", "loss", self._edge_reads)
                self._open = "loss"
                self._client.switch("forward", "loss", self._edge_reads)
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        return None


# Autograd nodes _perturbed looks at, at most, behind an input
PERTURBED_NODES = 16


def _perturbed(x, parameter):
    """Whether ``x``, a tensor that requires a gradient, is an adversarial
    perturbation of data: a leaf that is no parameter (``x_adv.requires_grad_()``)
    or made from such leaves by a few ops (``X + delta``, clamped), its
    whole graph (at most PERTURBED_NODES nodes) reaching no parameter. A
    generator's output, the input of a GAN's critic, reaches the
    generator's parameters: not one."""
    fn = x.grad_fn
    if fn is None:
        return not isinstance(x, parameter)
    todo, seen = [fn], 0
    while todo:
        seen += 1
        if seen > PERTURBED_NODES:
            return False
        fn = todo.pop()
        leaf = getattr(fn, "variable", None)  # AccumulateGrad's
        if leaf is not None:
            if isinstance(leaf, parameter):
                return False
            continue
        todo.extend(f for f, _ in fn.next_functions if f is not None)
    return True
