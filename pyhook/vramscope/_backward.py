"""One process-wide wrapper of ``torch.autograd.backward``.

``backward`` must begin when the user's backward starts, not when autograd
reaches the model's output: a loss over a 30,000-word vocabulary spends most
of its backward before that point (the seed model of
the H100 recordings). Every path users
take ends in this function: ``loss.backward()``,
``scaler.scale(loss).backward()`` (a Tensor), ``accelerator.backward(loss)``
(calls ``loss.backward``; observed in callorders/accelerate.txt) all reach
``Tensor.backward``, which calls ``torch.autograd.backward`` by its module
attribute at every call (torch 1.13 to 2.x, ``torch/_tensor.py``), so one
wrapper there sees them all. A per-thread depth makes a backward run inside
another (a hook that calls backward) part of the outer one.

The wrapper is installed once, when the first Watcher registers, and undone
when the last one leaves (refcounted). While one Watcher listens, what is
set there is its ``user_backward`` (:func:`_retarget`), which runs a
backward of its step at rest whole (begin, the call and the end in one
frame, none of this module's) and passes any other to the wrapper's general
path; with several, the wrapper gives a backward to the one whose step is
at rest. In the general path each listener decides whether a backward is
its own (``user_backward_begin`` returns True); the first that claims it is
the only one asked and the only one to get the end call. Undo restores the
original only when the attribute is still ours; if someone wrapped on top
of us, ours stays in place but inert.
"""

import functools
import threading
import weakref

from . import _safe, _tracebacks

_lock = threading.Lock()
# Weak references to Watchers, in registration order: a Watcher that was
# never removed goes away with its model instead of listening forever.
_listeners = []
# "listeners": a tuple of _listeners as it stands, which the wrapper reads
# (no copy a call; add() and discard() replace it).
# "unclaimed": called (no arguments) after a backward no listener took
# (auto-attach's, which then looks for a model that trains in place of its own).
# "autograd": (torch's backward, the wrapper), "rest": the wrapper's general
# path, while installed; "direct": the one listener's entry set in their
# place (_retarget).
_state = {"torch": None, "autograd": None, "rest": None, "direct": None, "listeners": (),
          "unclaimed": None}


class _Depth(threading.local):
    """Per thread: how deep in the wrappers this thread's backward is (0: not
    inside one)."""

    depth = 0


_local = _Depth()


def _make(original, name):
    local = _local
    passed_through = _tracebacks.passed_through

    def rest(args, kwargs):
        # A backward that no watch ran whole at rest (Watcher.user_backward
        # passes it here): inside another backward, or with no listener, the
        # call alone; else the watches asked in turn. Its callers take the
        # hook's frames out of the traceback of what the call raises.
        depth = local.depth
        if depth or not _listeners:
            local.depth = depth + 1
            try:
                return original(*args, **kwargs)
            finally:
                local.depth = depth
        listeners = _state["listeners"]
        owner = None  # one watch owns a backward (docs/hook.md, "Several models")
        for ref in listeners:
            w = ref()
            if w is None:
                continue
            try:
                if w.user_backward_begin():
                    owner = w
                    break
            except Exception as exc:  # noqa: BLE001 - never break backward()
                _safe.report(exc)
        if owner is None and len(listeners) == 1:
            # Nobody's: the only watch's step may be one whose model is
            # trained through its children (Watcher.unclaimed_backward).
            w = listeners[0]()
            try:
                if w is not None and w.unclaimed_backward():
                    owner = w
            except Exception as exc:  # noqa: BLE001 - never break backward()
                _safe.report(exc)
        if owner is None and _state["unclaimed"] is not None:
            try:
                _state["unclaimed"]()
            except Exception as exc:  # noqa: BLE001 - never break backward()
                _safe.report(exc)
        local.depth = 1
        try:
            return original(*args, **kwargs)
        except BaseException:
            if owner is not None:
                _safe.call(owner.unwound)
            raise
        finally:
            local.depth = 0
            if owner is not None:
                try:
                    owner.user_backward_end()
                except Exception as exc:  # noqa: BLE001
                    _safe.report(exc)

    def backward(*args, **kwargs):
        # With several watches (one alone is called directly: _retarget), a
        # watch whose step is at rest (its _fast) is given the backward
        # (Watcher.user_backward), which runs it whole or passes it to
        # rest. At most one watch owns the client's phases at a time, so at
        # most one can take it so.
        try:
            if not local.depth:
                for ref in _state["listeners"]:
                    w = ref()
                    if w is not None and w._fast:
                        return w.user_backward(original, rest, *args, **kwargs)
            return rest(args, kwargs)
        except BaseException as exc:
            passed_through(exc)
            raise

    backward.__name__ = name
    backward.__doc__ = getattr(original, "__doc__", None)
    backward.__wrapped__ = original
    backward._vramscope_wrapper = True
    return backward, rest


class _Entry(functools.partial):
    """``torch.autograd.backward`` while one watch listens: its
    ``user_backward``, called from torch with no frame between (C's
    ``functools.partial``), under the wrapper's name, doc and
    ``__wrapped__``."""


def _retarget():
    """Point ``torch.autograd.backward`` at the only listener's
    ``user_backward``, or at the wrapper for several (lock held). Where
    another's wrapper is on top of ours it stays as it is: what it calls
    passes every backward it does not run itself to ``rest``, which asks
    the listeners of the moment."""
    torch = _state["torch"]
    if torch is None:
        return
    wrapper = _state["autograd"][1]
    if torch.autograd.backward is not wrapper and torch.autograd.backward is not _state["direct"]:
        return
    live = [w for w in (r() for r in _listeners) if w is not None]
    entry = None
    if len(live) == 1:
        entry = _Entry(live[0].user_backward, _state["autograd"][0], _state["rest"])
        entry.__dict__.update(__name__=wrapper.__name__, __doc__=wrapper.__doc__,
                              __wrapped__=wrapper.__wrapped__, _vramscope_wrapper=True)
    torch.autograd.backward = entry or wrapper
    _state["direct"] = entry


def on_unclaimed(callback):
    """Call ``callback()`` after each backward no listener takes (None: none)."""
    _state["unclaimed"] = callback


def installed():
    """Report whether the wrappers are in place (for tests)."""
    return _state["torch"] is not None


def add(torch, listener):
    """Register ``listener``; install the wrappers on the first one."""
    with _lock:
        _listeners[:] = [r for r in _listeners if r() is not None]
        _state["listeners"] = tuple(_listeners)
        if any(r() is listener for r in _listeners):
            return
        if _state["torch"] is None:
            _install(torch)
        _listeners.append(weakref.ref(listener))
        _state["listeners"] = tuple(_listeners)
        _retarget()


def discard(listener):
    """Unregister ``listener``; undo the wrappers after the last one."""
    with _lock:
        _listeners[:] = [r for r in _listeners if r() is not None and r() is not listener]
        _state["listeners"] = tuple(_listeners)
        if not _listeners:
            _uninstall()
        else:
            _retarget()


def _install(torch):
    autograd = getattr(torch, "autograd", None)
    ab = getattr(autograd, "backward", None)
    if ab is None or getattr(getattr(torch, "Tensor", None), "backward", None) is None:
        return  # the output-grad hook remains the only signal
    wa, rest = _make(ab, "backward")
    autograd.backward = wa
    _state.update(torch=torch, autograd=(ab, wa), rest=rest, direct=None)


def _uninstall():
    torch = _state["torch"]
    if torch is None:
        return
    ab, wa = _state["autograd"]
    current = getattr(torch.autograd, "backward", None)
    if current is wa or current is _state["direct"] is not None:
        torch.autograd.backward = ab
    # A wrapper someone put on top of ours keeps calling ours, which is inert
    # now: with no listeners it just calls the original (the entry of a
    # watch, removed, passes every backward to the rest of its own wrapper).
    _state.update(torch=None, autograd=None, rest=None, direct=None)


def _reset_for_tests():
    """Forget every listener and undo the wrappers (tests build Watchers they never remove)."""
    with _lock:
        del _listeners[:]
        _state["listeners"] = ()
        _uninstall()
