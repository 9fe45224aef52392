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
        warn("vramscope: internal error (%s: %s); training continues, further errors "
             "are only counted" % (type(exc).__name__, _text(exc)), stacklevel=3)


def _text(exc):
    """``str(exc)``, or its type's name when its ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a user's exception may do anything
        return "<%s with no text>" % type(exc).__name__


def warn(text, category=RuntimeWarning, stacklevel=2):
    """Give ``text`` as a warning, pointing ``stacklevel`` frames above the
    caller. A warning is advice: under ``python -W error`` (or pytest's
    ``filterwarnings = error``) it becomes an exception, which never
    escapes into training."""
    try:
        warnings.warn(text, category, stacklevel=stacklevel + 1)
    except Exception:  # noqa: BLE001 - a warnings filter set to "error"
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
