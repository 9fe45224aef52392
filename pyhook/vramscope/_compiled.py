"""Keeping the hook's forward hooks out of compiled code (docs/hook.md,
"Compiled models").

A model compiled after ``watch()`` runs the hook's forward hooks inside the
compiled call: ``torch.compile(model)`` and a compiled function that calls
the model trace the model's ``_call_impl``, hooks included. Dynamo breaks
the graph at the first thing each hook does (a read of the clock), and
with ``fullgraph=True`` that break raises into training. So each forward
hook of the Watcher's begins with::

    if self._compiling() and self._outside():
        return None

``_compiling`` is torch's own question whether dynamo is tracing: dynamo
answers it with a constant True, with no guard; in eager code it is one
frame of two bytecodes (``bool``, a C call, where torch has no dynamo).
``_outside`` (:func:`outside_of`) is a function dynamo calls while it
traces, once per hook it meets, and takes the answer of as a constant
(``torch.compiler.assume_constant_result``): whether the hook stays out of
this trace (:func:`keep_out`).

* Under the model's ``torch.compile`` wrapper (an ``OptimizedModule``,
  found among the trace's callers) it does, whatever the trace: the
  wrapper takes the hook's forward hooks, which run eagerly around its
  compiled call, and the call being traced begins ``forward`` there. No
  graph break, with or without ``fullgraph``.
* ``Module.compile()`` after ``watch()`` moves the forward hooks before
  any trace (:meth:`CompiledMixin._on_compile`).
* Elsewhere (a compiled function that calls the model) it does where the
  trace may not break (``fullgraph=True``, ``torch.export``'s strict trace,
  ``error_on_graph_break``): the forward goes unseen. Otherwise the hook
  runs as before, eagerly after a graph break, once a call.
"""

import sys
import weakref

from . import _patch, _safe

_MODULE_FILE = ("torch", "nn", "modules", "module.py")
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
    whether the hook stays out of the trace (:func:`keep_out`). It holds
    the watcher by weak reference."""
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


def must_not_break():
    """Whether the trace dynamo runs now may not break its graph: a
    ``fullgraph=True`` compile or a strict export (``one_graph``), or
    ``error_on_graph_break``. True when that cannot be read."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        return bool(getattr(tx, "one_graph", True) or getattr(tx, "error_on_graph_break", False))
    except Exception:  # noqa: BLE001 - another dynamo: staying out never raises
        return True


def compiled_wrapper(model, frame, depth=1000):
    """The ``torch.compile`` wrapper of ``model`` (an ``OptimizedModule``,
    which holds it as ``_orig_mod``) whose call is among the callers of
    ``frame``, or None. Only the frames of ``torch.nn.Module``'s call
    methods are asked for their ``self``."""
    while frame is not None and depth > 0:
        code = frame.f_code
        if code.co_name in _CALLS and code.co_filename.endswith(_MODULE_FILE[-1]) \
                and code.co_filename.replace("\\", "/").endswith("/".join(_MODULE_FILE)):
            local = frame.f_locals
            module = local.get("self")
            if module is not model and getattr(module, "_orig_mod", None) is model:
                return module, local.get("args", ()), local.get("kwargs") or {}
        frame, depth = frame.f_back, depth - 1
    return None


def keep_out(watcher):
    """Decide, while dynamo traces one of ``watcher``'s forward hooks,
    whether the hook stays out of the trace. Under the model's compiled
    wrapper (found among the callers) it does: the wrapper takes the
    hook's forward hooks (the first time), which run eagerly around its
    compiled call. Elsewhere (a compiled function that calls the model) it
    does where the trace may not break (:func:`must_not_break`)."""
    found = compiled_wrapper(watcher.model, sys._getframe(1))
    if found is not None:
        watcher.hoist_to(*found)
        return True
    return must_not_break()


class CompiledMixin:
    """The Watcher's forward hooks moved around a compiled call. Mixed into
    :class:`_watch.Watcher`, which defines ``_on_forward_pre``,
    ``_on_forward``, ``_forward_hooks``, ``_undo`` and ``_lock``."""

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
                        self._model.__dict__.get("_compiled_call_impl")):
                    undo = _patch.around_compiled_call(
                        self._model, self._on_forward_pre, self._on_forward)
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
        model = self._model
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
        # The call being traced is the wrapper's: its forward begins now.
        pre(model, args, kwargs or {})
