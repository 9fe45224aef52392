"""Keeping the hook's forward hooks out of compiled code (docs/hook.md,
"Compiled models").

A model compiled after ``watch()`` runs the hook's forward hooks inside the
compiled call: ``torch.compile(model)``, a compiled function that calls the
model, and Lightning's compiled ``training_step`` trace the model's
``_call_impl``, hooks included. Dynamo broke the graph at the first thing
each hook did (a read of the clock), which with ``fullgraph=True`` raised
into training, and otherwise split the model's graph (inductor then fused
it differently: other weights), and recompiled it as the hook's state
moved. So each forward hook of the Watcher's begins with::

    if self._compiling() and self._outside():
        return None

``_compiling`` is torch's own question whether dynamo is tracing: dynamo
answers it with a constant True, with no guard; in eager code it is one
frame of two bytecodes (``bool``, a C call, where torch has no dynamo).
``_outside`` (:func:`outside_of`) is a function dynamo calls while it
traces, once per hook it meets, and takes the answer of as a constant
(``torch.compiler.assume_constant_result``): the hook stays out of every
trace (:func:`keep_out`), and under the model's ``torch.compile`` wrapper
(an ``OptimizedModule``, found among the trace's callers) the wrapper
takes the hook's forward hooks, which run eagerly around its compiled
call, and the call being traced begins ``forward`` there.
``Module.compile()`` after ``watch()`` moves the forward hooks around the
compiled call before any trace (:meth:`CompiledMixin._on_compile`).
Elsewhere (a compiled function that calls the model) the forward goes
unseen.
"""

import os
import sys
import weakref

from . import _patch, _safe

MODULE_FILE = os.path.join("torch", "nn", "modules", "module.py")
# Module methods whose frame holds ``self``, the module called.
_CALLS = frozenset(("_call_impl", "_wrapped_call_impl", "__call__"))


def dynamo_check(torch):
    """The cheapest function that dynamo answers True while it traces and
    eager code False: ``torch.compiler.is_dynamo_compiling`` (torch >= 2.3),
    ``torch.compiler.is_compiling``, else ``bool`` (no dynamo)."""
    compiler = getattr(torch, "compiler", None)
    return getattr(compiler, "is_dynamo_compiling", None) \
        or getattr(compiler, "is_compiling", None) or bool


def outside_of(watcher):
    """A function of no arguments that dynamo calls while it traces one of
    ``watcher``'s forward hooks, and whose answer it keeps as a constant:
    that the hook stays out of the trace (:func:`keep_out`). It holds the
    watcher by weak reference."""
    ref = weakref.ref(watcher)

    def outside():
        w = ref()
        if w is None:
            return True
        try:
            return keep_out(w)
        except Exception as exc:  # noqa: BLE001 - unsure: stay out, which never raises
            _safe.report(exc)
            return True

    # What torch.compiler.assume_constant_result(outside) sets, without
    # importing dynamo into a process that may never compile (import torch
    # does not). Dynamo calls a function so marked at trace time and takes
    # its result as a constant.
    outside._dynamo_marked_constant = True
    return outside


def compiled_wrapper(model, frame, depth=1000):
    """The ``torch.compile`` wrapper of ``model`` (an ``OptimizedModule``,
    which holds it, or a wrapper of it such as ``DistributedDataParallel``
    (``_patch.wraps``), as ``_orig_mod``) whose call is among the callers
    of ``frame``, or None. Only the frames of ``torch.nn.Module``'s call
    methods are asked for their ``self``."""
    while frame is not None and depth > 0:
        code = frame.f_code
        if code.co_name in _CALLS and code.co_filename.endswith(MODULE_FILE):
            local = frame.f_locals
            module = local.get("self")
            orig = getattr(module, "_orig_mod", None) if module is not model else None
            if orig is not None and (orig is model or _patch.wraps(orig, model)):
                return module, local.get("args", ()), local.get("kwargs") or {}
        frame, depth = frame.f_back, depth - 1
    return None


def keep_out(watcher):
    """While dynamo traces one of ``watcher``'s forward hooks: the hook
    stays out of the trace (True), and the model's compiled wrapper, where
    one is found among the callers, takes the hook's forward hooks (the
    first time), which run eagerly around its compiled call."""
    found = compiled_wrapper(watcher.model, sys._getframe(1))
    if found is not None:
        watcher.hoist_to(*found)
    else:
        # A compiled function calls the model: its forward goes unseen, and
        # so would its children's (no layout of children to look for).
        watcher.forward_compiled = True
    return True


class CompiledMixin:
    """The Watcher's forward hooks moved around a compiled call. Mixed into
    :class:`_watch.Watcher`, which defines ``_on_forward_pre``,
    ``_on_forward``, ``_zero_grad``, ``_forward_hooks``, ``_undo`` and
    ``_lock``."""

    def _on_compile(self, original, args, kwargs):
        """``model.compile()`` after ``watch()``: the compiled call would
        run the model's forward hooks inside it (dynamo traces
        ``_call_impl``), so they leave the model and run around the compiled
        call (``_patch.around_compiled_call``), as for a model compiled
        before ``watch()``; a compile again gets its new compiled call
        wrapped too. The call's errors propagate."""
        out = original(*args, **kwargs)
        try:
            with self._lock:
                if self._active and not _patch.is_watched_call(
                        self._model().__dict__.get("_compiled_call_impl")):
                    undo = _patch.around_compiled_call(
                        self._model(), self._on_forward_pre, self._on_forward)
                    if undo is not None:
                        for handle in self._forward_hooks:
                            handle.remove()
                        self._forward_hooks = ()
                        self._undo.append(undo)
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
        return out

    def hoist_to(self, wrapper, args=(), kwargs=None):
        """Give the model's forward marks to ``wrapper``, the model's
        ``torch.compile`` wrapper: forward hooks on it that run the
        Watcher's for the model, eagerly, around the compiled call; undone
        by ``remove()``. Called from dynamo's trace (:func:`keep_out`)."""
        model = self._model()
        pre, post = self._on_forward_pre, self._on_forward

        def on_wrapper_pre(_module, args, kwargs):
            return pre(model, args, kwargs)

        def on_wrapper(_module, args, output):
            return post(model, args, output)

        with self._lock:
            if not self._active or any(r() is wrapper for r in self._hoisted):
                return  # a trace again (a recompile): its call's forward began outside
            self._hoisted.append(weakref.ref(wrapper))
            handles = (wrapper.register_forward_pre_hook(on_wrapper_pre, with_kwargs=True),
                       wrapper.register_forward_hook(on_wrapper))
            self._undo += [h.remove for h in handles]
            if "zero_grad" not in wrapper.__dict__:
                # The wrapper's zero_grad() is Module's over the same
                # parameters, which the model's patch never sees (the HF
                # Trainer's torch_compile zeroes through it), as a DDP
                # wrapper's (ForwardMixin._watch_wrapper).
                self._undo.append(_patch.patch_method(
                    wrapper, "zero_grad", None, None, entry=self._zero_grad, plain_set=True))
                self._zero_seen = True
        # The call being traced is the wrapper's: its forward begins now.
        # Its end is not seen (nothing of the hook runs in the compiled
        # call), so no forward counts as running: the next one, another
        # micro-step's, is not taken for a nested call.
        pre(model, args, kwargs or {})
        with self._lock:
            self._depth = 0
