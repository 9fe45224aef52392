"""Optimizers made while a watch lives (docs/hook.md, "Loop shapes"):
``torch.optim.Optimizer.__init__`` is wrapped, once, while any watch
follows, and each optimizer made is told to the live watches
(``Watcher.optimizer_made``), after its own ``__init__`` ran. A training
run that unfreezes its model in a second stage makes a new optimizer
there, and the watch moves to it.

The wrapper takes no lock (an optimizer made in a child after ``fork()``
must not wait for one held in the parent) and never raises: a failure is
an internal error, counted.
"""

import functools
import threading
import weakref

from . import _patch, _safe

_lock = threading.Lock()  # follow() and unfollow() only
_watchers = weakref.WeakSet()
_patched = None  # (the class, its own __init__, the wrapper)


def follow(torch, watcher):
    """Tell ``watcher`` of every optimizer made from now until
    :func:`unfollow`; False where torch has no ``Optimizer``."""
    global _patched
    cls = getattr(getattr(torch, "optim", None), "Optimizer", None)
    if cls is None or "__init__" not in vars(cls):
        return False
    with _lock:
        _watchers.add(watcher)
        if _patched is None:
            original = vars(cls)["__init__"]

            @functools.wraps(original)
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                try:
                    told = list(_watchers)
                except Exception as exc:  # noqa: BLE001 - changed while copied (another thread)
                    _safe.report(exc)
                    return
                for w in told:
                    _safe.call(w.optimizer_made, self)

            __init__._vramscope_wrapper = True
            cls.__init__ = __init__
            _patched = (cls, original, __init__)
    return True


def unfollow(watcher):
    """Stop telling ``watcher``; with no watch left, ``Optimizer.__init__``
    is torch's own again (where nobody wrapped it since: then ours stays,
    telling nobody)."""
    global _patched
    with _lock:
        _watchers.discard(watcher)
        if _watchers or _patched is None:
            return
        cls, original, wrapper = _patched
        if vars(cls).get("__init__") is wrapper:
            cls.__init__ = original
        _patched = None


class SuccessorMixin:
    """The Watcher's side (which defines ``_hook_optimizers``,
    ``_unhook_optimizers``, the optimizer fields and ``_undo``): an optimizer made for the watched
    model becomes a candidate, its ``step()`` patched to look. A step() of
    it after a backward of the current step, in which the watched
    optimizer has not stepped, updates the model in the watched one's
    place: the watch moves to it (:meth:`_follow`), and this step() is the
    step's. The optimizer it leaves becomes a candidate in turn (a
    learning-rate finder's optimizer, used and dropped, gives the watch
    back)."""

    def optimizer_made(self, opt):
        """``opt`` was made (its ``__init__`` ran): a candidate if it trains
        the watched model and is none of the watched ones."""
        watched = self.optimizer
        if not self._active or opt is watched or any(r() is opt for r in self._held) \
                or id(opt) in self._candidates \
                or _patch.unwrap_optimizer(opt) is watched:
            return
        if _patch.trains(opt, self._model()):
            self._candidate(opt)

    def _candidate(self, opt):
        """Set ``opt.step`` to a look at each call (_patch.patch_method:
        as torch's learning-rate schedulers need it). Nothing of the
        watch's holds ``opt``: an optimizer made again each epoch and
        dropped is freed with its state. Undone at remove(), or when the
        watch moves to it."""
        if "step" in vars(opt):  # a step of its own instance: left alone
            return

        def candidate_step(original, args, kwargs):
            # original: opt.step, the class's (torch 2.x's with its step hooks)
            moved = False
            try:
                # after a backward of this step, in which the watched
                # optimizer has not stepped: this one updates the model now
                opt = original.__self__
                entry = self._candidates.get(id(opt))
                if entry is not None and entry[0]() is opt and self._active \
                        and self._client.micro and not self._step_called \
                        and self._open is None and not self._closure_depth \
                        and not self.framework_steps:
                    moved = self._follow(opt)
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
            if moved and not self.uses_step_hooks:
                return self._step_around(_patch.Patched.calling(original), *args, **kwargs)
            return original(*args, **kwargs)

        key = id(opt)
        candidates = self._candidates
        ref = weakref.ref(opt, lambda r: candidates.get(key, (None,))[0] is r
                          and candidates.pop(key, None))
        candidates[key] = (ref, _patch.patch_method(opt, "step", None, None, around=candidate_step))

    @staticmethod
    def _uncandidate(entry):
        """Take a candidate's look off, if it is alive and still has it."""
        entry[1]()

    def _follow(self, opt):
        """Move the watch to ``opt``: the old optimizer's hooks off (it
        becomes a candidate), ``opt``'s on. Returns True when moved. (From
        inside ``opt.step()``, before torch calls its step hooks: they are
        registered for this call.)"""
        with self._lock:
            if opt is None or not self._active:
                return False
            entry = self._candidates.pop(id(opt), None)
            if entry is not None:
                self._uncandidate(entry)
            old = self.optimizer
            self._unhook_optimizers()
            self._fast = False
            self._wrapper = None
            # The step under way had the new optimizer's zero_grad, unseen:
            # the next one is placed by the loop's shape, as before the move
            # (ZeroGradMixin.started_mid_step).
            self._zero_seen = True
            # An anatomy at this step's end: the new optimizer's state
            self._acts.scheduled = True
            self._set_optimizer(opt)
            self._hook_optimizers()
            if old is not None:
                self._candidate(old)
            return True

    def _drop_candidates(self):
        for entry in list(self._candidates.values()):
            _safe.call(self._uncandidate, entry)
        self._candidates.clear()
