"""The public API: watch(), phase(), mark() and the Handle watch returns.

One client per process, started lazily by the first watch(), phase() or
mark(). It is closed with ``goodbye`` (reason ``removed``) when the last
Handle is removed, and with reason ``exit`` at interpreter exit.
"""

import atexit
import os
import threading

from . import _client, _config, _cuda, _messages, _oom, _safe, _watch

_lock = threading.Lock()
_current = None  # the process's Client, or None
_refs = 0  # live Handles on _current


def _import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _start(config, model=None):
    torch = _import_torch()
    cuda = _cuda.detect(torch, model)
    version = getattr(torch, "__version__", None) if torch is not None else None
    return _client.Client(config, cuda=cuda, torch_version=version)


def _client_for(config=None, model=None):
    """Return the process's client, starting it when there is none (or it is closed)."""
    global _current, _refs
    with _lock:
        client = _current
        if client is not None and not client.closed and config is not None \
                and client.config.socket != config.socket:
            client.close("removed")  # watch() named another monitor
            client = None
        if client is None or client.closed:
            client = _start(config if config is not None else _config.resolve(), model)
            _current, _refs = client, 0
        return client


def current_client():
    """Return the running client, or None (for tests and tooling)."""
    return _current


class Handle:
    """Handle is what watch() returns: ``remove()`` undoes every hook.

    ``remove()`` is idempotent and sends ``goodbye`` (reason ``removed``) when
    no other handle uses the connection. A Handle is a context manager, like
    torch's ``RemovableHandle``. A disabled watch returns an inert Handle.
    """

    def __init__(self, watcher=None, client=None):
        self.watcher = watcher
        self.client = client

    @property
    def active(self):
        """True while the hooks are installed."""
        return self.watcher is not None and self.watcher.active

    def stats(self):
        """Return the client's health counters, or None for an inert handle."""
        return self.client.stats() if self.client is not None else None

    def remove(self):
        """Remove every hook and patch; the first call only does anything."""
        global _current, _refs
        watcher, self.watcher = self.watcher, None
        if watcher is None:
            return
        watcher.remove()
        with _lock:
            if self.client is _current:
                _refs -= 1
                last = _refs <= 0
            else:
                last = True
        if last and self.client is not None:
            self.client.close("removed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def watch(model, optimizer=None, *, socket=None, sample_hz=None, reset_peaks=None,
          activations_every=None, batch_size=None):
    """Hook ``model`` (and ``optimizer``) and stream their phases to the monitor.

    Arguments override the environment (VRAMSCOPE_SOCKET, VRAMSCOPE_SAMPLE_HZ,
    VRAMSCOPE_RESET_PEAKS, VRAMSCOPE_ACTIVATIONS_EVERY). With
    VRAMSCOPE_DISABLE=1 nothing is hooked and no thread starts. Returns a Handle.
    """
    global _refs
    config = _config.resolve(socket=socket, sample_hz=sample_hz, reset_peaks=reset_peaks,
                             activations_every=activations_every, batch_size=batch_size)
    if config.disabled:
        return Handle()
    torch = _import_torch()
    if torch is None:
        raise ImportError("vramscope.watch needs torch, which is not importable")
    client = _client_for(config, model)
    watcher = _watch.Watcher(torch, client, model, optimizer, config)
    _safe.call(_oom.install, torch, client, lambda: getattr(watcher, "_open", None))
    with _lock:
        if client is _current:
            _refs += 1
    return Handle(watcher, client)


def _user_name(name):
    text = _messages.clip(name, _messages.MAX_NAME).strip()
    return text or "unnamed"


def _disabled():
    return _config._env_bool(os.environ, "VRAMSCOPE_DISABLE")


class phase:  # noqa: N801 - used like a function: ``with vramscope.phase("eval"):``
    """phase marks a user-named phase: ``with vramscope.phase("eval"): ...``.

    Phases nest; each sends a begin and an end edge (``user: true``). Works
    without watch() (the client starts on first use).
    """

    __slots__ = ("name", "_client")

    def __init__(self, name):
        self.name = _user_name(name)
        self._client = None

    def __enter__(self):
        if not _disabled():
            self._client = _safe.call(_client_for)
            if self._client is not None:
                _safe.call(self._client.phase, self.name, "begin", True)
        return self

    def __exit__(self, *exc):
        if self._client is not None:
            _safe.call(self._client.phase, self.name, "end", True)
        return False


def mark(name):
    """Send a named point event (``vramscope.mark("checkpoint")``)."""
    if _disabled():
        return
    client = _safe.call(_client_for)
    if client is not None:
        _safe.call(client.mark, _user_name(name))


@atexit.register
def _at_exit():
    client = _current
    if client is not None:
        _safe.call(client.close, _oom.exit_reason(), 0.5)


def _after_fork_in_child():
    global _current, _refs, _lock
    _lock = threading.Lock()
    _safe._lock = threading.Lock()
    client, _current, _refs = _current, None, 0
    if client is not None:
        client.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
