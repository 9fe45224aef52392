"""Out-of-memory flight recorder (docs/protocol.md, message ``oom``).

When the CUDA caching allocator runs out of memory, send its state at that
moment, before the process may die: through torch's out-of-memory observer
(``torch._C._cuda_attach_out_of_memory_observer``, where this torch has it;
torch calls it after releasing the allocator's lock, with the device, the
bytes asked for, the device's total or allowed maximum, and its free bytes)
or, without one, from the uncaught exception at interpreter exit. An
uncaught exception also makes the goodbye's reason ``error``. Features are
detected, never versions; every path is guarded: nothing here may raise
into training.
"""

import sys

from . import _devices, _fragments, _messages, _safe

OOM_BUDGET = 2.0  # seconds: the process is about to die; say what was alive

_state = {"client": None, "phase": None, "step": None, "observer": False, "error": False,
          "sent": False}


def install(torch, client, open_phase, phase_step=None):
    """Route out-of-memory reports of this process to ``client``.

    ``open_phase`` returns the name of the phase in progress (or None), and
    ``phase_step`` the step that phase belongs to (None: the step in
    progress; an evaluation between steps is the step's it follows). The
    observer and the excepthook are installed once per process; later calls
    only switch the client.
    """
    _state["client"], _state["phase"], _state["sent"] = client, open_phase, False
    _state["step"] = phase_step
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    # The CUDA allocator's observer, for a CUDA (or ROCm) reader only: other
    # sources' readers are _devices._Seam (a CPU run on a CUDA build of torch
    # without a driver would fail to attach it).
    if not _state["observer"] and callable(attach) and client.cuda is not None \
            and not isinstance(client.cuda, _devices._Seam):
        attach(_observer)
        _state["observer"] = True
    if sys.excepthook is not _excepthook:
        _excepthook.previous = sys.excepthook
        sys.excepthook = _excepthook


def exit_reason():
    """Return the goodbye reason at exit: ``error`` after an uncaught exception."""
    return "error" if _state["error"] else "exit"


def _observer(*args):
    # (device, requested, device total or allowed maximum, device free)
    _safe.call(_note)
    _safe.call(_send, args[1] if len(args) > 1 else None, args[3] if len(args) > 3 else None,
               args[2] if len(args) > 2 else None)


def _note():
    """Tell the watch whose phase is open that it ran out of memory (a loop
    may catch the error and go on: _failed_steps)."""
    client = _state["client"]
    ref = client.owner if client is not None else None
    watcher = ref() if ref is not None else None
    if watcher is not None:
        watcher.note_oom()


def _excepthook(kind, value, tb):
    # The user's own hook (or Python's) runs whatever this one meets: an
    # exception whose __str__ raises skipped it.
    try:
        _state["error"] = True
        if _safe.call(_is_oom, kind, value) and not _state["sent"]:
            _safe.call(_send, None, None, None, tb)  # tb's frames hold what the step held
    finally:
        previous = getattr(_excepthook, "previous", None) or sys.__excepthook__
        previous(kind, value, tb)


def _is_oom(kind, value):
    """torch.cuda.OutOfMemoryError, or torch 1.x's RuntimeError saying so."""
    if any(c.__name__ == "OutOfMemoryError" for c in getattr(kind, "__mro__", ())):
        return True
    if not issubclass(kind, RuntimeError):
        return False
    try:
        return "out of memory" in str(value)
    except Exception:  # noqa: BLE001 - a user's exception whose __str__ raises
        return False


def _send(requested, device_free, device_total, tb=None):
    client = _state["client"]
    if client is None or client.closed:
        return
    phase = _state["phase"]() if _state["phase"] is not None else None
    if device_total is None and client.cuda is not None:
        info = client.cuda.device_info()  # None for a source with no CUDA device
        device_total = info.get("total") if info else None
    step = _state["step"]() if _state["step"] is not None else None
    if step is None:
        step = client.step
    mem = client.read_mem()
    msg = _messages.build_oom(step, phase, mem, requested, device_free, device_total)
    if client.emit(msg):
        _state["sent"] = True
    _safe.call(_census_at_oom, client, mem, requested, device_free, device_total, tb, step)


def _census_at_oom(client, mem, requested, device_free, device_total, tb, step=None):
    """What was alive, by category, and the allocator's cache (docs/census.md);
    ``tb``: an uncaught error's traceback, whose frames' locals are holders."""
    ref = client.census_target
    watcher = ref() if ref is not None else None
    if watcher is None:
        return
    state = None
    # The CUDA allocator's segments, for a CUDA (or ROCm) reader only: asking
    # another source's torch for them would initialise CUDA.
    if client.cuda is not None and not isinstance(client.cuda, _devices._Seam):
        state = _fragments.state(watcher._torch, mem, requested, device_free, device_total)
    watcher.take_census("oom", step=step, budget=OOM_BUDGET,
                        extra={"allocator": state} if state is not None else None,
                        ended_frames=_frames_of(tb))


def _frames_of(tb):
    """The frames of traceback ``tb``, innermost first."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    frames.reverse()
    return frames
