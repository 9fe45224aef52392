"""Automatic phase detection for one model and optimizer (docs/hook.md).

Phases are sequential: beginning one ends the phase still open, so a phase
whose end cannot be observed never stays open past the next one. Every
allocator read is made at a phase's end (a begin edge carries the read of the
end edge made in the same hook call, else none): on the every-step path by
``Client.put`` itself, which reads, guards the read and queues the end edge
(with the next phase's begin edge), elsewhere by ``_end``.
"""

import functools
import threading
import weakref

from . import (_anatomy, _backward, _compiled, _cuda, _figures, _jit, _messages, _meter, _patch,
               _safe, _schedule, _steps, _successor)
from ._schedule import FIRST_MEASURED

# The user phase that closes an interval between two steps in which memory
# rose that no phase of the hook's saw (Watcher._close_unseen): the
# monitor's session.BetweenPhase.
BETWEEN = "between_steps"
from ._backward_phase import BackwardMixin
from ._census_trigger import CensusMixin
from ._closing import ClosingMixin, rose
from ._compiled import CompiledMixin
from ._failed_steps import FailedStepsMixin
from ._forward_phase import EVAL, ForwardMixin
from ._steps import StepsMixin
from ._successor import SuccessorMixin
from ._training_step import TrainingStepMixin
from ._zero_phase import ZeroGradMixin

# The end edge's field of an evaluation a forward of which ran with
# gradients enabled (docs/protocol.md, "phase": grad).
_GRAD = {"grad": True}

# Watcher below reads queue_callback_of; tests/test_stacks.py asks
# _kwargs_pre_hooks through this module.
queue_callback_of = _patch.queue_callback_of
_kwargs_pre_hooks = _patch.kwargs_pre_hooks


def _model_freed(watch_ref, _model_ref):
    """A watched model was freed (the loop dropped it; its hooks went with
    it): its watch ends, as at remove(), and lets go of the optimizer's
    patches, whose optimizer the loop may still hold."""
    watch = watch_ref()
    if watch is not None:
        _safe.call(watch.remove)


class _NoTensor:
    """What nothing is an instance of (a torch without ``Tensor``)."""


class Watcher(ForwardMixin, ZeroGradMixin, BackwardMixin, StepsMixin, ClosingMixin,
              CensusMixin, TrainingStepMixin, CompiledMixin, SuccessorMixin, FailedStepsMixin):
    """Watcher hooks one model (and optimizer) and emits its phases through a client.

    ``framework_steps``: when True (set by the HF Trainer callback) the step
    post hook ends ``step`` but the step counter advances at
    :meth:`finish_step`, so the ``model.zero_grad()`` the Trainer runs after
    the update stays in the step it belongs to.
    """

    # What the every-step paths read and write, in slots of their own, side
    # by side in a few cache lines (the rest of the Watcher's state is in
    # its __dict__): on a training step these paths run with cold caches,
    # and a dict of some 60 attributes spreads them over dozens of lines
    # (docs/hook.md, "Cost").
    __slots__ = ("_fast", "_open", "_client", "_self_ref", "_acts", "_depth", "_idle",
                 "_step_depth", "_edge_reads", "_active", "_step_called", "_zero_depth",
                 "_trained", "_user_bw", "_model", "_grad_enabled", "_tensor_type",
                 "_in_backward", "_optimizer", "_tail_step", "_last_shape", "_last_dtype",
                 "_last_size", "_moved", "_ref", "_zero_seen", "_zero_seen_last",
                 "_zero_after", "_due", "_census_want", "_backward_micro", "_bw_step",
                 "_ends_at_forward", "_exact", "_step_plan", "_skip_forward", "_quiet",
                 "_hook_output", "_kw_patch", "_closure_depth", "_updated", "_unseen", "_lock",
                 "_in_training_step", "framework_steps", "breakdown_always", "figures",
                 "_tracing", "_compiling", "_outside", "_eval_trains")

    def __init__(self, torch, client, model, optimizer, config, *, step_hooks=None,
                 queue_callback="detect", meter=None, global_backward=True, name=None,
                 wrapper=None, others=()):
        self._fast = False
        self._step_depth = 0  # (StepsMixin)
        self._in_training_step = False  # (TrainingStepMixin)
        # Read and reset at every phase of every step (bench/cost_model.py's
        # "every phase" design), not only on breakdown steps.
        self.breakdown_always = False
        # The figures of each step, kept for a framework's logger (keep_figures).
        self.figures = None
        self._census_want = None  # (CensusMixin)
        # The last training input's shape and dtype, and its size and message dicts
        self._last_shape = self._last_dtype = None
        self._last_size = (None, None)
        self._kw_patch = None  # the undo of torch 1.13's forward wrapper while it is in place
        self._torch = torch
        self._grad_enabled = torch.is_grad_enabled  # bound once: hooks ask at every forward
        # Whether torch.jit.trace is recording a call: nothing of the hook's
        # runs inside a trace (bool() answers False where torch cannot trace).
        self._tracing = getattr(getattr(torch, "_C", None), "_is_tracing", None) or bool
        # Whether dynamo traces a call, and whether a forward hook it traces
        # stays out (_compiled: the first test of each forward hook).
        self._compiling = _compiled.dynamo_check(torch)
        self._outside = _compiled.outside_of(self)
        self._hoisted = []  # weak references to the compiled wrappers that took the forward hooks
        # Whether a compiled function ran the model, its forward hooks out of the trace (_compiled)
        self.forward_compiled = False
        self._forward_hooks = ()  # the handles of the model's own forward hooks
        # What the edges of this watch carry as ``model`` (docs/protocol.md).
        self.name = _messages.watch_name(name if name is not None else type(model).__name__)
        # What the client holds as its owner: a weak reference, so a watch the
        # user dropped without remove() never keeps its model alive.
        self._self_ref = weakref.ref(self)
        self._client = client
        # The model and the optimizers, held weakly, as is all else of theirs
        # the watch keeps: the watch lives as long as they do (their hooks
        # and patches hold it), and a model and optimizer the loop drops are
        # freed at once, as without the hook (docs/hook.md, "Models one
        # after another"). Each is called to get it: None once freed.
        self._model = _patch.weak(model, functools.partial(_model_freed, self._self_ref))
        opt = _patch.unwrap_optimizer(optimizer) if optimizer is not None else None
        self._set_optimizer(opt, step_hooks)
        # The other optimizers of a model split between several that all
        # update it each step (Muon and AdamW), held weakly: each step() of
        # theirs is part of the step's update, which ends with the last of
        # them (_update_done), and their state is counted with the watched
        # one's (_optimizers).
        self._others = tuple(_patch.weak(o) for o in others if o is not opt) \
            if opt is not None else ()
        self._stepped = set()  # ids of the members whose step() ended in this update
        # What the caller passed, when it wrapped the optimizer (watch() unwraps first).
        if wrapper is None and optimizer is not opt:
            wrapper = optimizer
        self._wrapper = _patch.weak(wrapper) if wrapper is not None and wrapper is not opt \
            else None
        self._opt_undo = []  # what hooks the optimizers (_hook_optimizer)
        self._candidates = {}  # id -> (weak reference, its look) (SuccessorMixin)
        self._config = config
        self._lock = threading.RLock()
        self._active = True
        self._open = None
        self._depth = 0
        self._skip_forward = False
        self._quiet = False
        # Whether a forward of the model in eval mode with gradients enabled
        # may be a training one: until a backward shows the model training in
        # train mode, and again once one follows such a forward (_forward_phase,
        # "eval mode").
        self._eval_trains = True
        self._in_backward = False
        self._user_bw = False
        self._backward_micro = 0
        self._zero_depth = 0
        self._closure_depth = 0
        self._zero_seen = False  # this step began with zero_grad
        self._zero_seen_last = True  # the step before did (True: no guessing at step 0)
        owner = client.owner() if client.owner is not None else None
        if owner is not None:  # a step it will never end (a k-fold loop's next fold)
            _safe.call(owner.end_unupdated)
        # A skipped step's closing read, for the next zero_grad's begin: at
        # first, one the watch before left on this connection (_end_unupdated).
        self._skip_close, client.pending_close = client.pending_close, None
        self._tail_step = None  # the step a tail zero_grad belongs to, while open
        # Under a framework's steps: the update of the open step has ended, so
        # a zero_grad now is the step's tail (transformers' Trainer zeroes
        # through the model, or its DDP wrapper, after the update) and reads
        # at its end.
        self._updated = False
        # Whether this loop zeroes after optimizer.step() (None: not known yet),
        # decided once from where the first step ended (_steps.zero_follows_step);
        # _step_frames is None until that step ends, () once used.
        self._zero_after = None
        self._unwound = (-1, None)  # (step, phase) an error left backward() in (unwound)
        # (step, phase) the allocator's out-of-memory observer fired in, and
        # (step, why) of a backward that raised, until its step ends
        # (FailedStepsMixin)
        self._oom_at = self._failed_bw = None
        self._restart_due = False  # a failed step ended: restart the peaks (_restart_peaks)
        self._eval_step = 0  # the step an open evaluation follows (_eval) or is in
        # An evaluation inside a step (_eval_in_step): (the read at its begin,),
        # whose peaks are the step's; None between steps.
        self._eval_carry = None
        # Whether a forward of the open evaluation ran with gradients
        # enabled (in eval mode: _forward_phase; its end edge says so), and
        # whether one's input required them (a probe: an attack's forward).
        self._eval_grad = self._eval_probe = False
        # The token (Client.between) of a step after whose closing read the
        # sampler saw memory rise with nothing of the hook's open or read
        # (saw_between), until the next step's first phase closes that
        # interval (_close_unseen); None otherwise.
        self._unseen = None
        self._step_frames = None
        self._step_called = False
        # The step in which this watch's last own backward began, and (no
        # optimizer only) the step that its next training forward ends: see
        # docs/hook.md, "Loop shapes".
        self._bw_step = -1
        self._ends_at_forward = -1
        self._idle = True
        self._trained = False
        # Whether forwards hook their output for the backward fallback (below).
        self._hook_output = True
        self.framework_steps = False
        self._undo = []
        self._queue_callback = (queue_callback_of(torch) if queue_callback == "detect"
                                else queue_callback)
        if meter is None and config.activations_every > 0 \
                and _meter.SavedTensorMeter.supported(torch, model):
            meter = _meter.SavedTensorMeter(torch, model)
        self._acts = _schedule.Activations(meter, config.activations_every)
        self._due = 0  # no step before this one is measured by the schedule
        self._figure_cache = _anatomy.FigureCache(_anatomy.plain_tree(torch, model))
        # torch.is_tensor is a Python function; isinstance against this is not.
        self._tensor_type = getattr(torch, "Tensor", None) or _NoTensor
        # Exact peaks (docs/protocol.md, "Exact peaks"): whether this step
        # reads at each phase end (a breakdown step) or only where it closes.
        self._exact = bool(getattr(client, "exact", False))
        # What plans a step at its closing read (bound once; None: not exact).
        self._step_plan = self._plan if self._exact else None
        self._edge_reads = True
        # zero_grad's end is read on steps below this (docs/hook.md, "Which
        # edges read").
        self._zero_until = FIRST_MEASURED
        # The last breakdown step's peak and held memory, each as the range
        # that is "the same" (within the noise), and the closing edge's
        # extra fields of a plain step that stays within both:
        # (peak low, peak high, held low, held high, {"span": "step", "same_as": k}).
        self._ref = None
        self._moved = False  # the last plain step moved beyond the noise
        # Whether this step may take the every-step fast paths (docs/hook.md,
        # "Cost"): set where a plain step ends with the loop at rest
        # (_steps._finish_step), cleared by anything that leaves it.
        self._fast = False
        self._grad_hook = self._on_output_grad
        self._done_callback = self._on_backward_done
        self._acts.prepare(client.step)
        try:
            self._install(global_backward)
        except Exception:
            self.remove()
            raise

    _fast_loop = False
    # The optimizer fields besides the slot _optimizer, set by _set_optimizer
    _held = ()
    _others = ()
    _update_codes = frozenset()
    uses_step_hooks = False
    step_fallback = False

    # A model copied with copy.deepcopy (an EMA copy) or pickled whole
    # (torch.save(model)) carries our hooks along: a copy keeps calling this
    # Watcher, which ignores modules it does not watch, and a pickle restores
    # inert hooks. Either way, copying a watched model never fails.
    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (_patch.inert, ())

    # ---- installation ---------------------------------------------------------------

    def _set_optimizer(self, opt, step_hooks=None):
        """The optimizer fields, for ``opt`` (unwrapped; None: no optimizer)."""
        self._optimizer = _patch.weak(opt) if opt is not None else None
        # The optimizers it holds that may run its update (SAM's base
        # optimizer): their step() and zero_grad() are the watch's too, and
        # their state is counted with its own (_optimizers).
        held = tuple(_patch.held_optimizers(opt)) if opt is not None else ()
        self._held = tuple(map(_patch.weak, held))
        # The code of the methods of their classes but torch's (StepsMixin._in_update_method)
        self._update_codes = _steps.method_codes((opt,) + held) \
            if opt is not None else frozenset()
        if step_hooks is None:
            step_hooks = opt is not None and _patch.has_step_hooks(opt)
        self.uses_step_hooks = bool(step_hooks)
        # An optimizer whose class has step hooks but whose instance cannot take
        # them (Optimizer.__init__ skipped, nothing to unwrap): the patch is a fallback.
        self.step_fallback = (opt is not None and not self.uses_step_hooks
                              and callable(getattr(opt, "register_step_pre_hook", None)))

    def _optimizers(self):
        """What the figures and the census are given: the optimizer, or it,
        those it holds and the others of its update (None: none, or freed)."""
        opt = self.optimizer
        if not (self._held or self._others) or opt is None:
            return opt
        return (opt,) + tuple(o for o in (r() for r in self._held + self._others)
                              if o is not None)

    def optimizers(self):
        """The watched optimizer and the others that update the model with
        it, those alive (unwrapped; empty without an optimizer)."""
        opt = self.optimizer
        if opt is None:
            return []
        return [opt] + [o for o in (r() for r in self._others) if o is not None]

    def _install(self, global_backward):
        m = self._model()
        undo = _patch.around_compiled_call(m, self._on_forward_pre, self._on_forward)
        if undo is not None:
            self._undo.append(undo)  # the hooks run outside the compiled call
        elif _patch.kwargs_pre_hooks(m):
            h = m.register_forward_pre_hook(self._on_forward_pre, with_kwargs=True)
        else:
            h = m.register_forward_pre_hook(self._on_forward_pre)
            # Without kwargs in pre-hooks (torch 1.13) keyword inputs are read
            # by a wrapper of the instance's forward, which only looks. It is
            # undone at the first training forward whose input size the pre
            # hook found in its positional arguments: a model called that way
            # pays no wrapper frame at every forward (docs/hook.md, "Cost").
            self._kw_patch = _patch.patch_method(
                m, "forward", None, None, wrap_args=self._peek_kwargs, kwargs_only=True)
            self._undo.append(self._kw_patch)
        if undo is None:
            self._undo.append(h.remove)
            post = m.register_forward_hook(self._on_forward)
            self._undo.append(post.remove)
            self._forward_hooks = (h, post)
        # torch.jit.script of the model compiles it without the hooks (_jit)
        _jit.add(self._torch, self)
        self._undo.append(lambda: _jit.discard(self))
        if callable(getattr(type(m), "compile", None)):  # Module.compile(): torch >= 2.2
            self._undo.append(_patch.patch_method(m, "compile", None, None,
                                                  around=self._on_compile))
        self._undo.append(_patch.patch_method(m, "zero_grad", None, None, entry=self._zero_grad))
        replicas = _patch.keep_out_of_replicas(m)  # the hook's wrappers stay the model's own
        if replicas is not None:
            self._undo.append(replicas)
        training_step = callable(getattr(m, "training_step", None))
        if training_step:
            # Lightning calls training_step, not forward (callorders/lightning.txt).
            self._undo += self._install_training_step(m)
        # The fast paths serve a loop of the global backward wrapper and an
        # optimizer (_steps._finish_step): of the model's own forward, or
        # a training_step under a framework's callbacks.
        # A split update's steps take the general paths: each step() asks
        # whether the update is whole (_update_done).
        self._fast_loop = global_backward and self._optimizer is not None and not self._others
        if global_backward:
            _backward.add(self._torch, self)
            self._undo.append(lambda: _backward.discard(self))
        if self._optimizer is None:
            return
        opt = self._optimizer()
        wrapper = self._wrapper() if self._wrapper is not None else None
        if _steps.inherits_zero_grad(wrapper, opt):
            self._undo.append(_patch.patch_method(wrapper, "zero_grad", None, None,
                                                  entry=self._zero_grad))
        self._undo += [self._drop_candidates, self._unhook_optimizers]
        self._hook_optimizers()
        # A new optimizer for the model, made later, may take the watch over
        # (SuccessorMixin); not a split update's, whose optimizers were named.
        if not self._others and _successor.follow(self._torch, self):
            self._undo.append(lambda: _successor.unfollow(self))

    def _hook_optimizers(self):
        """Hook the watched optimizer, those it holds and the others of its
        update (their own held ones are not looked for). A held optimizer's
        step() called from the watched one's is nested in it (_step_depth);
        called alone (SAM's second_step()) it is the step."""
        self._hook_optimizer(self._optimizer(), self.uses_step_hooks)
        for other in filter(None, (r() for r in self._held + self._others)):
            self._hook_optimizer(other, _patch.has_step_hooks(other))

    def _hook_optimizer(self, opt, step_hooks):
        """Patch ``opt``'s zero_grad, and hook its step() by its step hooks
        or, without them, by a patch (undone by :meth:`_unhook_optimizers`)."""
        self._opt_undo.append(_patch.patch_method(opt, "zero_grad", None, None,
                                                  entry=self._zero_grad))
        if step_hooks:
            pre = opt.register_step_pre_hook(self._on_step_pre_hook)
            post = opt.register_step_post_hook(self._on_step_post_hook)
            self._opt_undo += [pre.remove, post.remove]
        else:
            self._opt_undo.append(_patch.patch_method(opt, "step", None, None,
                                                      entry=self._step_around))

    def _unhook_optimizers(self):
        for undo in reversed(self._opt_undo):
            _safe.call(undo)
        self._opt_undo = []

    @staticmethod
    def _guarded(fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            return None

    @property
    def active(self):
        """True until remove()."""
        return self._active

    @property
    def model(self):
        """The watched model (None once freed)."""
        return self._model()

    @property
    def optimizer(self):
        """The watched optimizer, unwrapped (None without one, or once freed)."""
        return self._optimizer() if self._optimizer is not None else None

    @property
    def idle(self):
        """True between steps: nothing of the next step has happened yet."""
        return self._idle

    def after_fork_in_child(self):
        """Go inert in a forked child: its hooks stay installed but return at
        once, and the lock is new (a thread of the parent may have held the
        old one at the fork, and that thread does not exist here)."""
        self._lock = threading.RLock()
        self._active = False
        self._fast = False

    def remove(self):
        """Undo every hook and patch and close the open phase; idempotent."""
        with self._lock:
            if not self._active:
                return
            self.finish_between()
            self._active = False
            self._fast = False
            self._acts.stop()
            if self._open is EVAL:
                self._end_eval()
            elif self._open is not None:
                # A phase an error left open (a training function retried
                # with a smaller batch watches again): its edge says so.
                why = self._failure(None)
                if why is not None:
                    self._end(self._open, closing=True, failed=why)
                else:
                    self._end(self._open)
            else:
                self._end_unupdated()
        for undo in reversed(self._undo):
            _safe.call(undo)
        self._undo = []
        _safe.call(self.end_capture)

    def end_unupdated(self):
        """A new watch() on this watch's connection: _end_unupdated, never
        waiting for the lock."""
        if self._lock.acquire(False):
            try:
                if self._active:
                    self._end_unupdated()
            finally:
                self._lock.release()

    def _end_unupdated(self):
        """This watch's step is open after a backward with no update since
        and nothing open, and no phase of this watch will end it: the watch
        goes (its model dropped: a k-fold loop's next fold after a skipped
        last update, or after micro-batches left over) or another watch
        starts on its connection. It ends here, or the next watch's phases
        would join it. Read now, as a skipped step is where it ends
        (_skipped_close), the read's peak is the step's, but not what it
        held: the loop may have freed the fold's memory since. The next
        watch's first zero_grad carries it (Client.pending_close).
        (Lock held.)"""
        client = self._client
        if self._between_micro_steps() and self._failed_bw is None \
                and self._optimizer is not None and not self.framework_steps \
                and client.owner is self._self_ref:
            self._fast = False
            close = self._skipped_close(held=False)
            self._finish_unplaced_step()
            client.pending_close = close

    # ---- phase bookkeeping -------------------------------------------------------

    def _begin(self, name, input=None, step=None):  # noqa: A002
        """End the open phase and begin ``name`` (``step``: a number other than the
        current one, for a tail zero_grad; its end edge carries it too).

        A begin edge has no allocator read of its own (docs/hook.md, "Cost"):
        it carries the read of the end edge of the phase it closes here,
        else mem null.
        """
        self._fast = False
        last = self._open
        if last is EVAL:  # an evaluation between steps ends at a training phase
            self._end_eval()
            last = None
        if last == "forward" and (self._in_training_step or self._child_layout) \
                and name != "loss":
            self._forward_done()  # a phase that training_step itself begins
            last = "loss"
        extra = None if input is None else {"input": input}
        raw = None
        if last is None:
            if name != "backward" and step is None:
                self._open_first(name, extra)
                return
            if self._client.owner is not self._self_ref:
                self._take_over()
        elif last == "backward" or step is not None or input is not None \
                or self._tail_step is not None:
            raw = self._end(last)
        else:
            if name == "backward":
                self._backward_micro = self._client.micro
            self._switch(last, name, self._edge_reads
                         and (last != "zero_grad" or self._client.step < self._zero_until))
            return
        self._open = name
        if name == "backward":
            self._backward_micro = self._client.micro
        if step is not None:
            self._tail_step = step
        self._client.put(None, name, raw, False, None, extra, None, step)

    # The three methods below are the every-step path's building blocks. The
    # hooks that run at every step carry copies of their bodies, each headed
    # by a "copy of" line naming the method and its arguments, a frame less
    # each (docs/hook.md, "Cost"); tests/test_hot_copies.py checks that every
    # copy is the body of its original with those arguments put in.

    def _open_first(self, name, extra):
        """Begin ``name`` with no phase open (no end to read): its begin edge,
        mem null, ``extra`` its further fields (a forward's ``input``)."""
        if self._client.owner is not self._self_ref:
            self._take_over()
        self._open = name
        self._client.switch(None, name, False, extra)

    def _switch(self, last, name, reads):
        """End the open phase ``last`` and begin ``name`` in one client call,
        both edges carrying the end's read (made when ``reads``): the
        every-step switches, forward -> loss and loss -> backward."""
        self._open = name
        self._client.switch(last, name, reads)

    def _eval(self):
        """An evaluation between steps begins: a user phase ``eval`` of the step
        it follows, read at both edges as user phases are, so that its peak is
        its own and the next step's first read starts after it. It ends at
        the next training phase's begin (_begin) or at remove(). (Lock held.)"""
        self._open = EVAL
        self._fast = False
        self._eval_step = max(self._client.step - 1, 0)
        self._eval_carry = None  # its reads are no step's (_end_eval)
        self._eval_grad = self._eval_probe = False
        self._client.phase(EVAL, "begin", True, self._eval_step)

    def _eval_in_step(self):
        """Begin an evaluation between two micro-steps of an accumulation
        step (a Lightning validation at a batch count that falls inside it,
        a loop that evaluates every so many batches): a user phase ``eval``
        of this step, read at both edges, so that its peak is its own and
        no training phase's, nor the step's. The read at its begin closes
        the step's training so far: it stays among the step's reads (_plan)
        and, where the step reads only where it closes, the sender raises
        that closing read's peaks to it (Client.carry), as it does for a
        user's reset. (Lock held.)"""
        client = self._client
        self._open = EVAL
        self._fast = False
        self._eval_step = client.step
        self._eval_grad = self._eval_probe = False
        raw = client.read_raw() if client.cuda is not None else None
        self._eval_carry = (raw,)
        client.edge(EVAL, "begin", raw, True, client.step)

    def _eval_outside_phases(self):
        """A forward under no_grad, or a validation_step, with nothing open,
        an optimizer and no user phase naming this stretch: an evaluation
        between steps (_eval; transformers' Trainer evaluates after
        on_step_end, between its steps, too), or between two micro-steps of
        a step (_eval_in_step). (Lock held.)"""
        if self._open is not None or self._optimizer is None or self._client.user_depth:
            return
        if self._idle:
            self._eval()
        elif self._between_micro_steps():
            self._eval_in_step()

    def _between_micro_steps(self):
        """Nothing open inside a step, a backward done in it and no update
        begun: between two of its micro-steps, or after its last."""
        return self._open is None and not self._idle and self._client.micro > 0 \
            and not self._step_called

    def _end_eval(self):
        client = self._client
        self._open = None
        carry, self._eval_carry = self._eval_carry, None
        raw = client.read_raw() if client.cuda is not None else None
        client.edge(EVAL, "end", raw, True, self._eval_step, None,
                    _GRAD if self._eval_grad else None)
        if client.peaks is None:
            return
        reads = client.peaks.step_reads
        if carry is None:
            reads.clear()  # between steps: its reads are no step's (_plan)
            return
        # Inside a step: the read at its end is the evaluation's own; the
        # one at its begin stays the step's.
        if reads and raw is not None and reads[-1] is raw:
            reads.pop()
        if not self._edge_reads and carry[0] is not None:
            client.carry(carry[0])

    def _take_over(self):
        """Make this watch the one whose automatic phase is open: end the phase
        another watch on this client left open (one automatic phase at a time)
        and name the edges after this one (docs/hook.md, "Several models").
        The other's lock is only tried: two watches trained on two threads at
        once never wait on each other."""
        client = self._client
        other = client.owner
        other = other() if other is not None else None
        client.owner = self._self_ref
        self._fast = False
        if other is not None and other is not self:
            # The fast paths take the owner for granted (_fast holds only
            # for it: _steps._finish_step): the other leaves them.
            other._fast = False
            if other._open is not None and other._lock.acquire(False):
                try:
                    if other._open is not None:
                        client.model = other.name
                        other._end(other._open)
                except Exception as exc:  # noqa: BLE001
                    _safe.report(exc)
                finally:
                    other._lock.release()
        client.model = self.name

    def _end(self, name, closing=False, failed=None):
        """End ``name`` if it is the open phase: read the allocator once (but
        zero_grad, which only frees, reads on the first steps only, and a plain
        step's phases read only where the step closes: ``step``, or the phase
        ``closing`` says ends the step) and return that read (None when
        nothing was read or ``name`` was not open). A zero_grad after a
        framework's update reads: it ends the step (``_updated``).
        ``failed``: the phase raised (_failed_steps): its edge says so."""
        if self._open != name:
            return None
        self._open = None
        self._fast = False
        client = self._client
        raw = None
        read = client.reader
        closing = self._exact and (closing or name == "step")
        if read is not None and (closing or self._edge_reads) \
                and (name != "zero_grad" or client.step < self._zero_until or closing) \
                or read is not None and name == "zero_grad" and self._updated:
            # The general path, which returns its read (a begin edge carries
            # it): client.read_raw() inlined, a frame less. The every-step
            # edges read in client.put instead.
            try:
                raw = read()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        if failed is not None:
            extra = self._failed_extra(raw, failed) if closing else {"failed": failed}
        else:
            extra = self._step_plan() if closing and raw is not None else None
        if name == "backward":
            self._in_backward = False
            self._user_bw = False
            client.put(name, None, raw, False, self._backward_micro, extra)
            client.micro = self._backward_micro + 1
        elif self._tail_step is not None:
            if raw is None and read is not None:
                # A zero_grad after optimizer.step() ends its step: its read is
                # the memory held between steps, without the gradients it frees.
                raw = _safe.call(read)
            client.put(name, None, raw, False, None, extra, None, self._tail_step)
            self._tail_step = None
            if raw is not None:
                self._after_tail()
        else:
            client.put(name, None, raw, False, None, extra)
            if name == "zero_grad" and self._updated and raw is not None:
                self._after_tail()
        return raw

    def keep_figures(self):
        """Keep each step's figures for a framework's logger (opt-in: the
        plain step's path is unchanged without it) and return the
        :class:`_figures.StepFigures` they go to; None where the reads give
        no exact peaks."""
        with self._lock:
            if self.figures is None and self._exact:
                self.figures = _figures.StepFigures()
                self._step_plan = self._plan_keeping
            return self.figures

    def _activity(self):
        """Training work is starting: the step is no longer idle, and a step
        whose post hook never ran is finished first (one whose step() raised
        was ended as failed first where a zero_grad or a training forward
        starts: _failed_steps)."""
        if self._step_called and not self._closure_depth and not self._in_update_method():
            self._finish_step()
        if self._unseen is not None:
            self._close_unseen()
        self._idle = False

    # ---- between steps: what the hook does not see ----------------------------------

    # A plain step reads the allocator once, where it closes, and that read's
    # peak covers everything since the last step's closing read: memory used
    # between the two by something the hook does not see (no forward of the
    # watched model: another model's evaluation, an EMA copy, a checkpoint)
    # would count as the next step's. The sampler thread (Client._run_sampler)
    # watches that stretch at no cost to the training thread; when it saw
    # memory rise there, the next step's first phase reads once more before
    # it begins, as a user phase BETWEEN of the step just ended (docs/hook.md,
    # "Between steps").

    def _after_tail(self):
        """A zero_grad that ends its step read after the step's closing read
        (a loop that zeroes after the update, a framework's zero_grad after
        its update): the stretch between steps starts at that read, which is
        no read of the next step's. (The read just made; no token without
        exact peaks.)"""
        client = self._client
        token, peaks = client.between, client.peaks
        if token is None or peaks is None or not peaks.step_reads:
            return
        pair = _cuda.peak_held(peaks.step_reads.pop())
        client.between = (token[0] if pair is None else pair[1], token[1], token[2])
        figures = self.figures
        if figures is not None and pair is not None and figures.step == token[2]:
            # The step's held memory is what stays after this read, as the
            # monitor's step table has it (the gradients zero_grad freed gone).
            figures.held = pair[1]

    def quiet_between(self, token):
        """Whether the loop rests between the step ``token`` (Client.between)
        closed and the next one, nothing of the hook's open or read since
        that step's closing read (an evaluation it sees or a user phase reads
        and resets itself). Any thread: a stale answer is asked again under
        the lock (_close_unseen)."""
        client = self._client
        peaks = client.peaks
        if token is None or client.between is not token or not self._active \
                or self._open is not None or client.user_depth or peaks is None \
                or peaks.step_reads:
            return False
        # Between steps; or, under a framework's steps, after its update while
        # the callbacks before the one that ends the step run (an evaluation
        # in a TrainerCallback's on_step_end listed before the hook's).
        return token[2] == client.step - 1 if self._idle \
            else self._updated and self.framework_steps and token[2] == client.step

    def saw_between(self, token, peak):
        """The sampler's read, between the step ``token`` names and the
        next, found the allocator's peak at ``peak``: above that step's held
        memory by more than the noise, with the loop still quiet, the next
        step closes the interval first (_close_unseen), off the fast paths
        (clearing ``_fast`` from another thread, as request_census does)."""
        if rose(token, peak) and self.quiet_between(token):
            self._unseen = token
            self._fast = False

    def _close_unseen(self):
        """Training work starts after the sampler saw memory rise between
        steps (saw_between): if nothing read since, one read closes that
        interval as the user phase BETWEEN of the step just ended, so that
        its peak is its own and the next step's first read starts after it.
        Both edges carry the time now, not the sample's: a begin edge older
        than the messages before it reads as a clock skew to the monitor.
        (Lock held.)"""
        token, self._unseen = self._unseen, None
        client = self._client
        if not self._on_cuda() or not self.quiet_between(token):
            return
        self._send_between(token[2], client.read_raw())

    def finish_between(self):
        """The watch ends between two steps (remove(), the process's exit):
        what ran after the last step's closing read, which no next step will
        read (a last evaluation of an EMA copy), is read now, once, and sent
        as BETWEEN of that step when it rose above what the step held, by
        more than the noise. Any thread; never waits for the lock."""
        if not self._lock.acquire(False):
            return
        try:
            client = self._client
            token = client.between
            self._unseen = None
            if not self._on_cuda() or not self.quiet_between(token):
                return
            raw = client.read_raw()
            pair = _cuda.peak_held(raw) if raw is not None else None
            if pair is not None and rose(token, pair[0]):
                self._send_between(token[2], raw)
            else:
                client.peaks.step_reads.clear()  # its read is no step's (_plan)
        finally:
            self._lock.release()

    def _send_between(self, step, raw):
        """Send BETWEEN of ``step`` with ``raw``, the read that closed it (both
        edges now, the begin's mem null); that read is no step's (_plan)."""
        client = self._client
        client.edge(BETWEEN, "begin", None, True, step)
        client.edge(BETWEEN, "end", raw, True, step)
        client.peaks.step_reads.clear()

    def _recover(self):
        """Forget what a forward that raised left behind: its meter
        installed, its depth counted."""
        meter = self._acts.meter
        if meter is not None and meter.active:
            meter.stop()
        self._depth = 0
        self._skip_forward = False
        self._quiet = False

