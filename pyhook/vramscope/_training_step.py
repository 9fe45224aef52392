"""Where the forward of a ``training_step`` ends (Lightning; docs/hook.md,
"Where forward ends"), and where it begins and ends in a plain loop that
calls the model's children instead of the model (docs/hook.md, "Loop
shapes"). Mixed into :class:`_watch.Watcher`.

``forward`` ends when the model's own computation ends, wherever the loss
is computed:

* ``training_step`` calls the model itself (``self(x)``): at the end of
  that call (the top-level forward hook, as in a plain loop);
* it calls the model's submodules (``self.net(x)``, ``self.encoder(x)``
  then ``self.decoder(z)``, as Lightning's README does): at the end of the
  last direct submodule whose output needs a gradient. Which call is the
  last is only known when something else begins, so each such end is kept
  (its time, and its allocator read on a step that reads its phases) and
  sent when the next phase begins, the loss module's call or the return of
  ``training_step``; a later one replaces it (its read's peak is carried
  into the next read, as a user's reset is). A submodule whose output
  needs no gradient (a metric updated after the loss, a frozen module)
  moves nothing;
* a loss module (``torch.nn.modules.loss._Loss``: ``self.criterion``) ends
  it when it is called;
* no module at all (functional code): at the return of ``training_step``,
  so ``forward`` holds the loss too.

``loss`` runs from there to the next phase (``zero_grad`` or ``backward``).

A ``training_step`` that called the submodules only inside ``self(x)``
unhooks them when it returns: from then on they cost nothing.
"""

from time import monotonic as _monotonic

from . import _patch, _safe
from ._meter import runs_compiled


class TrainingStepMixin:
    """Methods of the Watcher for a model with a ``training_step`` (which
    defines ``_begin``, ``_activity``, ``_note_input`` and the state they use)."""

    _sub_depth = 0
    _sub_hooks = ()  # the removes of the submodules' hooks, while installed
    # Whether this training_step called a submodule inside the model's own
    # forward, and outside it (the layout: self(x), or the submodules).
    _subs_inside = _subs_outside = False
    # (time, read, the meter's mark) of the end of the last submodule called
    # in this training_step while forward was open; None when there is none.
    _sub_end = None
    # A strategy's call of the model ran this training_step as the model's
    # forward (every Lightning strategy that wraps the model calls the
    # wrapper with the model's forward pointed at training_step: Strategy's
    # _forward_redirection): that call's end hook ends nothing (_on_forward).
    _redirected = False

    def _install_training_step(self, model):
        """Wrap ``training_step`` on the instance and hook the model's direct
        submodules (returns their undos)."""
        undo = [_patch.patch_method(model, "training_step", None, self._training_step_end,
                                    wrap_args=self._training_step_begin)]
        subs = self._hook_each_child(self._on_sub_pre, self._on_sub)
        self._sub_hooks = subs
        if callable(getattr(model, "validation_step", None)):
            undo.append(_patch.patch_method(model, "validation_step", None, None,
                                            wrap_args=self._validation_step_begin))
        return undo + subs

    def _hook_each_child(self, pre, post):
        """Hook the model's direct children with ``pre`` and ``post``, a
        loss module (``torch.nn.modules.loss._Loss``) with the call that
        ends forward; returns the removes (none left on an error). A child
        that runs compiled code is left alone: compiled in place
        (``Module.compile()``), its call would trace the hooks, which break
        the graph, and raise into training under ``fullgraph=True``."""
        loss_type = getattr(getattr(getattr(self._torch, "nn", None), "modules", None), "loss", None)
        loss_type = getattr(loss_type, "_Loss", None) or ()
        subs = []
        try:
            for child in self._model().children():
                if runs_compiled(child):
                    continue
                if isinstance(child, loss_type):
                    subs.append(child.register_forward_pre_hook(self._on_loss_module).remove)
                    continue
                subs.append(child.register_forward_pre_hook(pre).remove)
                subs.append(child.register_forward_hook(post).remove)
        except Exception:
            for remove in subs:
                _safe.call(remove)
            raise
        return subs

    def _validation_step_begin(self, args, kwargs):
        # A validation between steps, or between two micro-steps of one, is
        # an evaluation whatever the layout: one that calls only submodules
        # never reaches the model's forward hook, where a self(x) validation
        # begins it.
        if self._active and not self._torch.is_grad_enabled():
            with self._lock:
                self._fast = False
                self._eval_outside_phases()
        return args, kwargs

    def _unhook_subs(self):
        """The first training_step called the submodules only inside the
        model's own forward (``self(x)``), whose hook ends forward: their
        hooks would only cost time at every call from now on. (Lock held.)"""
        subs, self._sub_hooks = self._sub_hooks, ()
        for remove in subs:
            remove()  # a RemovableHandle's remove; remove() calls it again, harmlessly

    def _training_step_begin(self, args, kwargs):
        if self._depth:
            # Inside the model's own forward: a strategy's call of the model
            # runs training_step as its forward. That call frames the step
            # as a framework's loop does, so training_step is told as one
            # called directly (its submodules outside the model's forward)
            # and the call's end hook ends nothing.
            self._depth = 0
            self._redirected = True
        last = self._open
        if self._fast and (last == "forward" or last is None) and not self._in_training_step \
                and self._wrappers_checked and not (self._step_called and not self._closure_depth) \
                and self._grad_enabled():
            # The fast path (no lock): the training_step of a step at rest,
            # its forward begun by the framework's callback, or here (a
            # watch() without the callback) for a batch that leads with a
            # tensor, its size reused while shaped as the last input (the
            # optimizers' wrappers were looked at on the first step).
            if last is None:
                x = _patch.lead_tensor(args[0], self._tensor_type) if args else None
                if x is None:
                    return self._training_step_general(args, kwargs)
                if x.shape == self._last_shape and x.dtype is self._last_dtype:
                    size, extra = self._last_size
                else:  # a new shape (dynamic padding: most steps)
                    size = self._input_size(x)
                    extra = self._last_size[1]
                self._open = "forward"
                c = self._client  # Client.switch's tuple, queued as _fast allows
                c._queue.append((_monotonic(), None, "forward", c.step, c.micro, extra, c.model))
                self._acts.note_input(size)
            self._idle = False
            self._trained = True
            self._in_training_step = True
            self._sub_depth = 0
            self._subs_inside = self._subs_outside = False
            if self._sub_end is not None:
                self._drop_sub_end()
            acts = self._acts
            if acts.measuring:
                acts.start()
            return args, kwargs
        return self._training_step_general(args, kwargs)

    def _training_step_general(self, args, kwargs):
        if self._active and self._torch.is_grad_enabled():
            with self._lock:
                self._fast = False
                if not self._wrappers_checked:
                    self._watch_lightning_optimizers()
                self._activity()
                self._trained = True
                self._in_training_step = True
                self._sub_depth = 0
                self._subs_inside = self._subs_outside = False
                self._drop_sub_end()
                if self._open != "forward":
                    size = self._batch_size(args[0] if args else None, args, kwargs)
                    self._begin("forward", input=size)
                    if size is not None:
                        self._note_input(size)
                self._acts.start()
        return args, kwargs

    def _training_step_end(self):
        if self._fast and self._in_training_step \
                and not (self._subs_inside and not self._subs_outside and self._sub_hooks):
            # The fast path (no lock), nothing read at rest: forward ends
            # where the last submodule ended (_forward_done) and loss begins,
            # or the model's own forward hook ended it (self(x)).
            self._in_training_step = False
            end, self._sub_end = self._sub_end, None
            meter = self._acts.meter  # Activations.pause, written out
            if meter is not None and meter.active:
                if end is not None and end[2] is not None:
                    meter.loss_from(end[2])  # the loss's, computed after the submodules
                meter.stop()
            if self._open == "forward":
                t = _monotonic() if end is None else end[0]
                self._open = "loss"
                c = self._client  # Client.switch's tuple, queued as _fast allows
                c._queue.append((t, "forward", "loss", c.step, c.micro, None, c.model))
            return
        if self._active and self._in_training_step:
            with self._lock:
                self._fast = False
                self._in_training_step = False
                end, meter = self._sub_end, self._acts.meter
                if end is not None and end[2] is not None and meter is not None:
                    meter.loss_from(end[2])  # the loss's, computed after the submodules
                self._acts.pause()
                if self._open == "forward":
                    self._forward_done()
                else:
                    self._drop_sub_end()
                if self._subs_inside and not self._subs_outside and self._sub_hooks:
                    self._unhook_subs()

    # Submodules are hooked only on a model with a training_step; their
    # hooks return at once outside it and inside the model's own forward.

    def _on_sub_pre(self, module, args):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        if not self._in_training_step or not self._active:
            return None
        if self._depth:
            self._subs_inside = True
            return None
        if self._fast:  # a step at rest: the count alone (no lock)
            self._subs_outside = True
            self._sub_depth += 1
            return None
        with self._lock:
            self._subs_outside = True
            self._sub_depth += 1
        return None

    def _on_sub(self, module, args, output):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        if not self._in_training_step or self._depth or not self._active:
            return None
        if self._fast:
            # A step at rest (no lock): a submodule's end while forward is
            # open is kept with its time alone (_keep_sub_end, nothing read).
            depth = self._sub_depth - 1
            self._sub_depth = depth
            if depth > 0 or self._open != "forward":
                return None
            self._sub_depth = 0
            if isinstance(output, self._tensor_type) and output.requires_grad:
                acts = self._acts
                self._sub_end = (_monotonic(), None,
                                 acts.meter.mark() if acts.measuring else None)
                return None
            try:
                self._keep_sub_end(output)
            except Exception as exc:  # noqa: BLE001 - a forward hook must not raise
                _safe.report(exc)
            return None
        with self._lock:
            self._sub_depth -= 1
            if self._sub_depth > 0 or self._open != "forward":
                return None
            self._sub_depth = 0
            try:
                self._keep_sub_end(output)
            except Exception as exc:  # noqa: BLE001 - a forward hook must not raise
                _safe.report(exc)
        return None

    def _keep_sub_end(self, output):
        """A child's end while forward is open: where the model's computation
        ended so far, kept, when its output needs a gradient (a metric
        updated after the loss, a frozen module: not the model's forward).
        (Lock held.)"""
        found = []
        _patch.grad_tensors(self._torch, output, found)
        if not found:
            return
        self._drop_sub_end()  # the model's computation went on
        raw = None
        if self._edge_reads:
            raw = self._client.read_raw()
        acts = self._acts
        self._sub_end = (_monotonic(), raw, acts.meter.mark() if acts.measuring else None)

    def _on_loss_module(self, module, args):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        if (self._in_training_step or self._child_layout) and not self._depth and self._active \
                and self._open == "forward" and not self._sub_depth:
            with self._lock:
                self._fast = False
                acts = self._acts
                if self._in_training_step and acts.measuring:
                    # what the loss module saves is the loss's (as after a
                    # model forward: the loss window until training_step returns)
                    acts.forward_done()
                self._forward_done()
        return None

    def _forward_done(self):
        """End the open forward where the model's computation ended (the
        last submodule's end, else now) and begin loss there. (Lock held.)"""
        try:
            end, self._sub_end = self._sub_end, None
            client = self._client
            self._open = "loss"
            if end is None:
                client.switch("forward", "loss", self._edge_reads)
                return
            t, raw = end[0], end[1]
            client.edge("forward", "end", raw, t=t)
            client.edge("loss", "begin", raw, t=t)
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)

    def _drop_sub_end(self):
        """Forget a kept submodule end; its read's peak goes into the next read."""
        end, self._sub_end = self._sub_end, None
        if end is not None and end[1] is not None:
            self._client.carry(end[1])

    # ---- a loop that calls the model's children ---------------------------------------

    # A plain loop may train the watched model without calling it: its
    # children are called instead (model[0](x), model.encoder(x) then
    # model.decoder(z), a method of the model's that calls them). The model's
    # forward hooks never fire and the backward is no watch's. At the end of
    # a step with such a backward (the wrapper tells the only watch), the
    # children are hooked, as a training_step's are, and from the next step
    # on the first child call of a training forward begins ``forward``, which
    # ends where the last child whose output needs a gradient ended (kept
    # until the backward, a loss module or another phase begins).
    _child_layout = False
    _unseen_backward = False  # a backward no watch claimed, in this step

    def unclaimed_backward(self):
        """The global wrapper: a backward began that no watch claimed, this
        the only one. In a step of this watch's at work (its zero_grad began
        it, nothing is open, no backward of its own yet) of a model that a
        loop could train through its children, it is this step's backward:
        the children are hooked now and the backward is taken (True); so
        too, with no children hooked, in a loop whose compiled function
        runs the model. Else it is noted for the step's end
        (_steps._finish_step)."""
        if not self._active or self._in_backward:
            return False  # (tested again under the lock)
        with self._lock:
            if not self._active or self._in_backward:
                return False
            self._unseen_backward = True
            client = self._client
            owner = client.owner
            if self._idle or self._open is not None or self._optimizer is None \
                    or self._bw_step == client.step or self._in_training_step \
                    or owner is not None and owner is not self._self_ref:
                return False
            if not self.forward_compiled:  # else the forward ran compiled, unseen
                self._hook_children()
                if not self._child_layout:
                    return False
            # The unseen forward was a training one: user_backward_begin takes
            # the backward as it takes one after a forward it saw.
            self._trained = True
            return self.user_backward_begin()

    def _hook_children(self):
        """Hook the model's direct children for the child layout (once; not
        on a model with a training_step, which has its own, nor on one a
        compiled function calls, whose children run compiled too:
        _compiled.keep_out). (Lock held.)"""
        model = self._model()
        if self._child_layout or self._sub_hooks or self.forward_compiled \
                or callable(getattr(model, "training_step", None)):
            return
        try:
            subs = self._hook_each_child(self._on_child_pre, self._on_child)
        except Exception as exc:  # noqa: BLE001 - the layout stays unseen
            _safe.report(exc)
            return
        if subs:
            self._sub_hooks = subs
            self._undo.extend(subs)
            self._child_layout = True
            self._fast_loop = False  # its steps take the general paths
            self._fast = False

    def _on_child_pre(self, module, args):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        _monotonic()  # dynamo breaks the graph here, where it may
        if not self._active or self._depth or self._in_backward or self._tracing():
            return None  # inside the model's own forward, a recomputation in backward, a trace
        with self._lock:
            try:
                fresh = self._open != "forward"
                if fresh:
                    self._sub_depth = 0  # a new forward: a child that raised left its count
                if self._sub_depth:  # a child called inside another's forward
                    self._sub_depth += 1
                    return None
                if not self._grad_enabled():
                    self._eval_outside_phases()  # an evaluation
                    return None
                self._sub_depth = 1
                if fresh:
                    self._activity()
                    self._trained = True
                    self._drop_sub_end()
                    size = _patch.input_size(self._torch.is_tensor, args, {})
                    self._begin("forward", input=size)
                    if size is not None:
                        self._note_input(size)
                self._acts.start()  # what the children save is the model's
            except Exception as exc:  # noqa: BLE001 - a forward hook must not raise
                _safe.report(exc)
        return None

    def _on_child(self, module, args, output):
        if self._compiling() and self._outside():  # out of a compiled call (_compiled)
            return None
        _monotonic()  # dynamo breaks the graph here, where it may
        if not self._active or self._depth or self._in_backward or not self._sub_depth \
                or self._tracing():
            return None
        with self._lock:
            self._sub_depth -= 1
            if self._sub_depth > 0 or self._open != "forward":
                return None
            try:
                self._acts.pause()  # the loss's saved tensors are not the model's
                self._keep_sub_end(output)
            except Exception as exc:  # noqa: BLE001 - a forward hook must not raise
                _safe.report(exc)
        return None
