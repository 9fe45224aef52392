"""Keeps the hook's wrappers out of the user's tracebacks.

The hook wraps calls the training loop makes (an optimizer's ``step`` and
``zero_grad``, ``Tensor.backward``, a forward on torch 1.13, the import of
torch under ``vramscope run``). An exception raised by the wrapped code
passes through the wrapper, and the traceback the user reads showed the
wrapper's frames between their own and torch's. (The wrappers of
``torch.cuda.memory_stats`` and ``reset_peak_memory_stats`` call C
functions; an error there keeps its frames, as the hook's own do.)

Each wrapper catches ``BaseException`` around the call it wraps, calls
:func:`passed_through` and re-raises with a bare ``raise``: the exception,
its type, message, cause and context are the same object's, only its
traceback lacks the hook's frames. Python 3.11 on re-raises the traceback
the exception carries; before 3.11 a bare ``raise`` re-raises the one the
handler caught, so there the wrapper's own frame stays, and only the hook's
frames below it go.
"""

import os
import sys

HOOK_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def hook_code(code):
    """Whether ``code`` (a frame's ``f_code``) is the hook's own."""
    return code.co_filename.startswith(HOOK_DIR)


def passed_through(exc, wrapper=None):
    """Drop from ``exc``'s traceback the wrapper's frame (``wrapper``, by
    default the caller's) and the hook's frames right below it (``around``
    helpers), when the exception came from the code the wrapper called. One
    the hook raised itself (its innermost frame is the hook's) keeps every
    frame, to be found. Never raises."""
    try:
        tb = exc.__traceback__
        if tb is None or tb.tb_frame is not (wrapper or sys._getframe(1)):
            return
        rest = tb.tb_next
        while rest is not None and hook_code(rest.tb_frame.f_code):
            rest = rest.tb_next
        if rest is None:
            return
        tb.tb_next = rest
        exc.__traceback__ = rest
    except Exception:  # noqa: BLE001 - the user's exception goes on unchanged
        pass
