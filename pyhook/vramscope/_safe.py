"""Keeps the hook's own failures away from the training loop.

Every hook body runs through :func:`guard` or :func:`call`: an exception is
counted and reported once through :mod:`warnings`, never raised to the caller.
"""

import functools
import threading
import warnings

_lock = threading.Lock()
_errors = 0
_warned = False


def errors():
    """Return how many internal errors the hook has swallowed so far."""
    return _errors


def report(exc):
    """Count ``exc`` as an internal error; warn about the first one only."""
    global _errors, _warned
    with _lock:
        _errors += 1
        first = not _warned
        _warned = True
    if first:
        try:
            warnings.warn(
                "vramscope: internal error (%s: %s); training continues, "
                "further errors are only counted" % (type(exc).__name__, exc),
                RuntimeWarning,
                stacklevel=3,
            )
        except Exception:  # a warnings filter set to "error" must not escape
            pass


def call(fn, *args, **kwargs):
    """Call ``fn`` and return its result, or None if it raised."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the point is to catch everything
        report(exc)
        return None


def guard(fn):
    """Decorate ``fn`` so that it never raises; it returns None instead."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            report(exc)
            return None

    return wrapper


def _reset_for_tests():
    global _errors, _warned
    with _lock:
        _errors = 0
        _warned = False
