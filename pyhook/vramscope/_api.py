"""The public API: watch(), phase(), mark() and the Handle watch returns.

One client per process, started lazily by the first watch(), phase() or
mark(). It is closed with ``goodbye`` (reason ``removed``) when the last
Handle is removed, and with reason ``exit`` at interpreter exit.
"""

import atexit
import os
import sys
import threading
import warnings
import weakref

from . import (_backward, _client, _config, _cuda, _devices, _dist, _jit, _messages, _oom, _patch,
               _safe, _sockcheck, _successor, _watch)

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
    cuda = _devices.detect(torch, model)
    version = getattr(torch, "__version__", None) if torch is not None else None
    dist = _safe.call(_dist.probe, torch) if torch is not None else None
    return _client.Client(config, cuda=cuda, torch_version=version, dist=dist)


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
            _handles[:] = [r for r in _handles if r() is not None and r() is not self]
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


def _looks_like_module(obj):
    return callable(getattr(obj, "register_forward_pre_hook", None)) \
        and callable(getattr(obj, "parameters", None))


def check_args(model, optimizer):
    """Raise ValueError for arguments watch() cannot use (nothing is hooked yet)."""
    # Lenient on purpose: anything with step() and zero_grad() can be watched.
    opt_like = optimizer is not None and _opt_like(optimizer)
    if not _looks_like_module(model):
        if _patch.is_optimizer_like(model) and optimizer is None:
            raise ValueError(
                "vramscope.watch: got the optimizer %s where the model goes; call "
                "vramscope.watch(model, optimizer)" % type(model).__name__)
        if _patch.is_optimizer_like(model) and _looks_like_module(optimizer):
            raise ValueError(
                "vramscope.watch(model, optimizer): the arguments look swapped: got the "
                "optimizer %s first and %s second; call vramscope.watch(model, optimizer)"
                % (type(model).__name__, type(optimizer).__name__))
        raise ValueError("vramscope.watch: model must be a torch.nn.Module, got %s"
                         % type(model).__name__)
    if isinstance(optimizer, (list, tuple)):
        # One model split between optimizers that all update it each step
        # (Muon for the matrices and AdamW for the rest): watch(model, [muon, adamw]).
        if not optimizer:
            raise ValueError("vramscope.watch: the list of optimizers is empty")
        for o in optimizer:
            if o is None or not _opt_like(o):
                raise ValueError("vramscope.watch: every optimizer in the list must be a torch "
                                 "optimizer (with step and zero_grad), got %s" % type(o).__name__)
        if len({id(o) for o in optimizer}) != len(optimizer):
            raise ValueError("vramscope.watch: the list of optimizers names one twice")
        return
    if optimizer is not None and not opt_like:
        raise ValueError("vramscope.watch: optimizer must be a torch optimizer (with step "
                         "and zero_grad), a list of them or None, got %s"
                         % type(optimizer).__name__)


def _opt_like(obj):
    return callable(getattr(obj, "step", None)) and callable(getattr(obj, "zero_grad", None))


def check_name(name):
    """Raise ValueError for a watch name that is not a non-empty string."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError("vramscope.watch: name must be a non-empty string, got %r" % (name,))


def _unique_name(name, model, client, given=()):
    """The given name, or the model's class name with ``_2``, ``_3`` ... after
    it when another live watch on ``client``, one of ``given``, or a watch
    of another model on ``client`` before (a k-fold loop's last fold, freed
    when the loop let it go) already has it: a model watched again keeps its
    name, and each fold's steps are told apart."""
    if name is not None:
        return _messages.watch_name(name)
    base = _messages.watch_name(type(model).__name__)
    with _lock:
        taken = {h.watcher.name for h in _live_handles() if h.client is client}
        before = getattr(client, "watch_names", None)
        if before is None and client is not None:
            try:
                before = client.watch_names = {}  # name -> a weak reference to its model
            except AttributeError:  # a client that takes no attribute: live watches only
                before = None
        taken.update(n for n, r in (before or {}).items() if r() is not model)
        taken.update(given)
        text, n = base, 1
        while text in taken:
            n += 1
            text = "%s_%d" % (_messages.clip(base, _messages.MAX_NAME - 6), n)
        if before is not None:
            before[text] = _patch.weak(model)
    return text


# Weak references to live Handles, for a second watch() on the same model or
# optimizer. Weak: a model the user deleted must not stay alive (and on the
# GPU) through this list; its Watcher keeps its Handle while the hooks live.
_handles = []


def _live_handles():
    """The handles whose watch is on (not removed, its model not freed)."""
    return [h for h in (r() for r in _handles)
            if h is not None and h.watcher is not None and h.watcher.active]
_told = set()  # one-time notices already given


def _say_once(key, text):
    if key in _told:
        return
    _told.add(key)
    try:
        warnings.warn(text, RuntimeWarning, stacklevel=4)
    except Exception:  # noqa: BLE001 - a warnings filter set to "error" must not escape
        pass


def _replace_earlier(model, optimizers):
    """Remove live watches of ``model`` or of one of ``optimizers`` (a
    notebook cell run twice)."""
    global _refs
    with _lock:
        old = [h for h in _live_handles() if h.watcher.model is model or any(
            o is mine for o in optimizers for mine in h.watcher.optimizers())]
    for h in old:
        watcher, h.watcher = h.watcher, None
        watcher.remove()
        with _lock:
            _handles[:] = [r for r in _handles if r() is not None and r() is not h]
            if h.client is _current:
                _refs -= 1
    if old:
        try:
            warnings.warn("vramscope: watch() again on a model or optimizer already watched; "
                          "the earlier hooks were removed and replaced", RuntimeWarning,
                          stacklevel=4)
        except Exception:  # noqa: BLE001
            pass
    return bool(old)


def watched():
    """Return the live Watchers (for integrations and tests)."""
    with _lock:
        return [h.watcher for h in _live_handles()]


def _none():
    return None


def watch(model, optimizer=None, *, socket=None, sample_hz=None, reset_peaks=None,
          activations_every=None, batch_size=None, name=None):
    """Hook ``model`` (and ``optimizer``) and stream their phases to the monitor.

    ``optimizer`` may be a list of the optimizers that all update the model
    each step (Muon for the matrices, AdamW for the rest): one step per
    update, whose ``step`` phase holds all of their updates.

    ``name`` tells this watch's steps from another's (a GAN's ``"G"`` and
    ``"D"``): every phase it marks carries it. The default is the model's
    class name, made unique among the live watches (``Linear``, ``Linear_2``).

    Arguments override the environment (VRAMSCOPE_SOCKET, VRAMSCOPE_SAMPLE_HZ,
    VRAMSCOPE_RESET_PEAKS, VRAMSCOPE_ACTIVATIONS_EVERY). With
    VRAMSCOPE_DISABLE=1 nothing is hooked and no thread starts. Returns a Handle.

    Only ``ValueError`` (a bad argument, raised before anything is hooked)
    leaves this function: any other failure is reported once as a warning and
    an inert Handle is returned, so training goes on. Optimizer wrappers
    (accelerate's ``AcceleratedOptimizer``, Lightning's ``LightningOptimizer``)
    are unwrapped; a second watch() of the same model or optimizer replaces
    the first.
    """
    global _refs
    check_args(model, optimizer)
    check_name(name)
    _sockcheck.origin = _safe.call(user_frame) or _sockcheck.origin
    config = _config.resolve(socket=socket, sample_hz=sample_hz, reset_peaks=reset_peaks,
                             activations_every=activations_every, batch_size=batch_size)
    if config.disabled:
        return Handle()
    try:
        return _watch_now(model, optimizer, config, name)
    except Exception as exc:  # noqa: BLE001 - watch() must never stop training
        _safe.report(exc)
        return Handle()


# Modules whose frames are not the user's line: the hook itself, the
# startup file `vramscope run` adds, and the frameworks that call watch()
# or the model for the user.
_NOT_USER = ("vramscope", "sitecustomize", "torch", "lightning", "pytorch_lightning",
             "transformers", "accelerate", "importlib", "runpy")


def user_frame():
    """``(filename, lineno)`` of the innermost caller outside the hook and
    the frameworks: where the warnings of the sender thread point."""
    f = sys._getframe(1)
    while f is not None:
        mod = f.f_globals.get("__name__") or ""
        if mod.split(".", 1)[0] not in _NOT_USER:
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return None


def _watch_now(model, optimizer, config, name=None):
    global _refs
    torch = _import_torch()
    if torch is None:
        _say_once("torch", "vramscope: torch is not importable; watch() does nothing")
        return Handle()
    others = ()
    if isinstance(optimizer, (list, tuple)):
        # the first is watched as a lone optimizer is; the others update with it
        optimizer, others = optimizer[0], tuple(map(_patch.unwrap_optimizer, optimizer[1:]))
    inner = _patch.unwrap_optimizer(optimizer) if optimizer is not None else None
    _replace_earlier(model, (inner,) + others if inner is not None else ())
    client = _client_for(config, model)
    watcher = _watch.Watcher(torch, client, model, inner, config, wrapper=optimizer,
                             name=_unique_name(name, model, client), others=others)
    if watcher.step_fallback:
        _say_once("fallback", "vramscope: %s has no step hooks (Optimizer.__init__ did not run "
                  "on it); its step() is wrapped instead" % type(inner).__name__)
    # A weak reference: the process-wide OOM report must not keep a deleted model alive.
    watcher_ref = weakref.ref(watcher)
    _safe.call(_oom.install, torch, client, lambda: getattr(watcher_ref(), "failing_phase", _none)(),
               lambda: getattr(watcher_ref(), "failing_step", _none)())
    client.census_target = watcher_ref  # the monitor's census requests arm the latest watch
    handle = Handle(watcher, client)
    with _lock:
        if client is _current:
            _refs += 1
        _handles.append(weakref.ref(handle))
    watcher.handle = handle  # the handle lives as long as the hooks do
    return handle


def census():
    """Take a census of the live tensors of the latest watch's device now:
    who holds them, and the autograd graphs they keep alive (docs/census.md).

    Returns the census (the ``census`` message, a dict) and sends it to the
    monitor; None without a live watch. Never raises.
    """
    try:
        live = watched()
        return live[-1].take_census("user") if live else None
    except Exception as exc:  # noqa: BLE001
        _safe.report(exc)
        return None


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

    __slots__ = ("name", "_client", "_step")

    def __init__(self, name):
        self.name = _user_name(name)
        self._client = None
        self._step = None

    def __enter__(self):
        if not _disabled():
            self._client = _safe.call(_client_for)
            if self._client is not None:
                self._step = _safe.call(_user_step, self._client)
                _safe.call(self._client.phase, self.name, "begin", True, self._step)
                _safe.call(_user_phase_began, self._client)
        return self

    def __exit__(self, *exc):
        client = self._client
        if client is not None:
            _safe.call(client.phase, self.name, "end", True, self._step)
            _safe.call(_user_phase_ended, client, self._step)
        return False


def _user_phase_began(client):
    client.user_depth += 1


def _user_phase_ended(client, step):
    client.user_depth -= 1
    if step is not None and step < client.step and client.peaks is not None:
        # Between steps: its reads are no step's (the hook's plan of the
        # next step starts after them).
        client.peaks.step_reads.clear()


def _user_step(client):
    """The step a user phase belongs to: between steps (every watcher idle), the
    step just finished, so an evaluation after the last step opens no step of its own."""
    ws = [w for w in watched() if w._client is client]
    if ws and client.step > 0 and all(w.idle for w in ws):
        return client.step - 1
    return client.step


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
        for handle in _live_handles():  # a split update left open, what ran after the last step
            _safe.call(handle.watcher.finish_update)
            _safe.call(handle.watcher.finish_between)
        _safe.call(client.close, _oom.exit_reason(), 0.5)


def _after_fork_in_child():
    global _current, _refs, _lock
    _lock = threading.Lock()
    for handle in _live_handles():
        handle.watcher.after_fork_in_child()
    del _handles[:]
    _safe._lock = threading.Lock()
    _backward._lock = threading.Lock()
    _jit._lock = threading.Lock()
    _successor._lock = threading.Lock()
    attach = sys.modules.get(__package__ + "._autoattach")  # imports this module
    if attach is not None:
        attach._lock = threading.RLock()
    client, _current, _refs = _current, None, 0
    if client is not None:
        client.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
