"""TorchScript of a watched model: compiled without the watch.

``torch.jit.script`` (and ``torch.jit.trace``, which builds its module the
same way) compiles a module's forward hooks with it, and a watch's are
Python that TorchScript cannot compile: scripting a watched model to export
it raised ``UnsupportedNodeError`` into the user's code. While a watch
lives, ``torch.jit._recursive.create_script_module``, which both call for a
module, is wrapped: for the call, the hooks of every live watch are taken
off the modules being compiled (and torch 1.13's keyword-input wrapper of
a model's ``forward``), then put back as they were, in their order. The
scripted copy is not watched: an exported model runs elsewhere. A forward
of the model on another thread while it compiles misses its hooks.
"""

import threading
import weakref

from . import _safe, _tracebacks

_lock = threading.Lock()
_watches = []  # weak references to the live watches
_state = {"recursive": None, "wrapped": None}


def add(torch, watch):
    """Register ``watch``; wrap on the first one. Never raises."""
    with _lock:
        _watches[:] = [r for r in _watches if r() is not None]
        if not any(r() is watch for r in _watches):
            _watches.append(weakref.ref(watch))
        if _state["recursive"] is None:
            _safe.call(_install, torch)


def discard(watch):
    """Unregister ``watch``; unwrap after the last one."""
    with _lock:
        _watches[:] = [r for r in _watches if r() is not None and r() is not watch]
        if not _watches:
            _uninstall()


def _install(torch):
    recursive = getattr(getattr(torch, "jit", None), "_recursive", None)
    original = getattr(recursive, "create_script_module", None)
    if original is None:
        return
    passed_through = _tracebacks.passed_through

    def create_script_module(nn_module, *args, **kwargs):
        undo = ()
        try:
            undo = _hide(nn_module)
        except Exception as exc:  # noqa: BLE001 - compiled as it would be unwatched
            _safe.report(exc)
        try:
            return original(nn_module, *args, **kwargs)
        except BaseException as exc:
            passed_through(exc)
            raise
        finally:
            for put_back in undo:
                put_back()

    create_script_module.__wrapped__ = original
    recursive.create_script_module = create_script_module
    _state.update(recursive=recursive, wrapped=(original, create_script_module))


def _uninstall():
    recursive = _state["recursive"]
    if recursive is None:
        return
    original, wrapper = _state["wrapped"]
    if getattr(recursive, "create_script_module", None) is wrapper:
        recursive.create_script_module = original
    _state.update(recursive=None, wrapped=None)


def _hide(module):
    """Take the live watches' hooks off ``module`` and its submodules;
    return the calls that put them back."""
    watches = [w for w in (r() for r in tuple(_watches)) if w is not None]
    if not watches:
        return ()
    ours = {id(w) for w in watches}
    modules = list(module.modules())
    undo = []
    for m in modules:
        for name in ("_forward_pre_hooks", "_forward_hooks"):
            hooks = getattr(m, name, None)
            if not hooks:
                continue
            items = list(hooks.items())
            kept = [(k, h) for k, h in items if id(getattr(h, "__self__", None)) not in ours]
            if len(kept) != len(items):
                hooks.clear()
                hooks.update(kept)
                undo.append(lambda hooks=hooks, items=items: (hooks.clear(), hooks.update(items)))
    inside = set(map(id, modules))
    for w in watches:
        model = w.model
        forward = getattr(model, "__dict__", {}).get("forward")
        if w._kw_patch is not None and forward is not None and id(model) in inside:
            del model.__dict__["forward"]
            undo.append(lambda d=model.__dict__, f=forward: d.__setitem__("forward", f))
    return undo


def _reset_for_tests():
    """Forget every watch and unwrap (tests build watches they never remove)."""
    with _lock:
        del _watches[:]
        _uninstall()
