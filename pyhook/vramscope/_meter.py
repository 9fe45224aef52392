"""The saved-activation meter (docs/anatomy.md, "Activations" and "By
module"): saved-tensor hooks around a measured forward, and whether a model
or a call runs compiled code, where they must not run.
"""

import os
import sys
import threading
from itertools import accumulate, chain, compress, repeat, takewhile
from operator import attrgetter, itemgetter, methodcaller
from weakref import ref as _weakref

from . import _patch, _saved_hooks
from ._anatomy import (StorageCache, TreeCache, _deref, _dict, _not_none, plain_tree,
                       storage_of, storages_of)


def runs_compiled(model, modules=None):
    """Whether ``model`` or one of its modules was compiled with
    ``torch.compile`` (an ``OptimizedModule``, which holds ``_orig_mod``),
    ``Module.compile()`` (``_compiled_call_impl``) or in its instance's
    ``forward`` or ``training_step`` (:func:`_dynamo_wrapped`). The meter's saved-tensor
    and module hooks would run inside the compiled code, where dynamo
    traces them and breaks the graph: measured on torch 2.15 with inductor,
    no call of the model ran compiled any more. ``modules``: the list
    ``model.modules()`` gives, where the caller has it (asked in C then)."""
    if model is None:
        return False
    try:
        if modules is not None:
            own = list(map(_dict, modules))
            if any(map(_holds_orig, map(_submodules, own))) \
                    or any(map(_not_none, map(_compiled_impl, own))):
                return True
            return any(map(_dynamo_wrapped, filter(_not_none, chain(
                map(_own_forward, own), map(_own_training_step, own)))))
        for m in model.modules():
            own = m.__dict__
            if "_orig_mod" in m._modules or own.get("_compiled_call_impl") is not None \
                    or _dynamo_wrapped(own.get("forward")) \
                    or _dynamo_wrapped(own.get("training_step")):
                return True
    except Exception:  # noqa: BLE001 - a module that cannot be walked: not known compiled
        pass
    return False


# C-level callables for runs_compiled's maps over the modules' __dict__s
_submodules = itemgetter("_modules")
_holds_orig = methodcaller("__contains__", "_orig_mod")
_compiled_impl = methodcaller("get", "_compiled_call_impl")
_own_forward = methodcaller("get", "forward")
_own_training_step = methodcaller("get", "training_step")


def _dynamo_wrapped(fn, depth=4):
    """Whether ``fn``, a method set on a module instance, is a function
    ``torch.compile`` made (it holds ``_torchdynamo_orig_callable``), or
    wraps one (``__wrapped__``: the hook's own patches, functools.wraps):
    Lightning compiles a compiled module's ``forward`` and
    ``training_step`` so (``lightning.pytorch.utilities.compile``)."""
    while fn is not None and depth > 0:
        if getattr(fn, "_torchdynamo_orig_callable", None) is not None:
            return True
        fn = getattr(getattr(fn, "__func__", fn), "__wrapped__", None)
        depth -= 1
    return False


_DYNAMO_FRAME = os.path.join("torch", "_dynamo", "eval_frame.py")
_filename = attrgetter("f_code.co_filename")
_is_dynamo = methodcaller("endswith", _DYNAMO_FRAME)


def in_compiled_call(frame, depth=200):
    """Whether ``frame`` runs under a call that torch.compile compiled: the
    Python frame of dynamo's entry (``torch/_dynamo/eval_frame.py``) is among
    its callers, other than the wrapper of a function dynamo is told to
    leave alone (``torch._dynamo.disable``: ``torch.utils.checkpoint``
    is one). Walked on measured steps only, and only once dynamo is
    imported (``import torch`` does not import it; a compiled call must)."""
    if frame is None or "torch._dynamo.eval_frame" not in sys.modules:
        return False
    # The callers' file names, taken in C (getattr(f, "f_back") folded over
    # the stack until None): the frames are walked in Python only when one
    # of them is dynamo's.
    frames = takewhile(_not_none, accumulate(repeat("f_back", depth - 1), getattr, initial=frame))
    if not any(map(_is_dynamo, map(_filename, frames))):
        return False
    while frame is not None and depth > 0:
        if frame.f_code.co_filename.endswith(_DYNAMO_FRAME) and not _disabling(frame):
            return True
        frame, depth = frame.f_back, depth - 1
    return False


def _disabling(frame):
    """Whether ``frame``, of dynamo's eval_frame.py, is the call wrapper of
    a ``DisableContext`` (its closure's ``self``), under which nothing is
    compiled."""
    try:
        return type(frame.f_locals.get("self")).__name__ == "DisableContext"
    except Exception:  # noqa: BLE001 - an unreadable frame: taken as compiling
        return False


# The module number of what the loss saved (the owner breakdown() is given).
LOSS = -1


class SavedTensorMeter:
    """SavedTensorMeter counts the bytes autograd saves for backward, and by
    which module (docs/anatomy.md, "By module").

    ``start()`` installs ``torch.autograd.graph.saved_tensors_hooks`` whose
    pack hook returns the same data (a detached alias) and keeps a weak
    reference to it; ``stop()`` removes them and counts the storages behind
    the aliases still alive, each once, parameters and buffers excluded
    (:meth:`_tally`): what autograd holds for backward. With ``split`` set
    (a step that takes the split by module, :class:`Activations`), the pack
    hook also notes the innermost module running, which two global module
    forward hooks keep, and ``start_loss()``, at the model forward's end,
    installs the pack hook alone again: what is saved from then until
    ``stop()`` (the backward's start) is the loss's. The meter is only
    active between those calls, so unmeasured steps pay nothing.
    """

    def __init__(self, torch, model):
        self._torch = torch
        self._model = _patch.weak(model)  # held weakly, as the Watcher holds it
        self._ctx = None
        self._seen = {}
        self._exclude = frozenset()
        self._cache = StorageCache()
        self._tree = TreeCache()
        self._plain = plain_tree(torch, model)
        # True while the hooks are installed (an attribute, not a property:
        # the Watcher checks it at every zero_grad and step).
        self.active = False
        self.tensors = None
        self.weights = None  # the bytes of tensors' storages
        self.total = 0
        # By module: built at the first measured forward (False: unavailable).
        self._map = None
        self._mstack = None
        self._mod_hooks = None
        mod = getattr(getattr(getattr(torch, "nn", None), "modules", None), "module", None)
        self._register = (getattr(mod, "register_module_forward_pre_hook", None),
                          getattr(mod, "register_module_forward_hook", None))
        # The bindings saved_tensors_hooks enters and exits by (1.13 and 2.x),
        # and the user's own hooks in force, which ours go on top of
        self._hooks = _saved_hooks.SavedHooks(torch)
        self._push, self._pop = self._hooks.push, self._hooks.pop
        self._tensor_type = getattr(torch, "Tensor", None) or type(None)
        # Set when a user's pack hook returned what the meter cannot look
        # into, or saved-tensor hooks were disabled: the step's figure is unknown.
        self.hidden = False
        self._split = None  # _modules.Split, bound with the module map
        self._labels = None  # the map's _modules.Labels (no module in it)
        self._stack = []
        self._sizes = {}
        self._in_loss = False
        self.loss_sizes = None
        self.touched = False
        # Whether this step takes the split by module (set by Activations
        # at the step's first measured forward).
        self.split = True
        # Since the last tally: weak references to the aliases packed and,
        # when split, the module running at each pack.
        self._refs = []
        self._mods = []
        self._lean = self._lean_pack()

    @staticmethod
    def supported(torch, model=None):
        """Report whether this torch has saved-tensor hooks and ``model``
        runs no compiled code (:func:`runs_compiled`)."""
        graph = getattr(getattr(torch, "autograd", None), "graph", None)
        return hasattr(graph, "saved_tensors_hooks") and not runs_compiled(model)

    def runs_compiled(self):
        """:func:`runs_compiled` of the model, its modules listed by the
        walk's cache where the model lists them as torch.nn.Module does."""
        model = self._model()
        if model is None or not self._plain:
            return runs_compiled(model)
        return runs_compiled(model, self._tree.modules(model))

    def reset(self):
        """Forget what was counted (start of a new micro-step). Nothing is
        counted but after start(), which sets ``touched``: a meter not
        touched since its last reset is left as it is."""
        if not self.touched:
            return
        self._seen = {}
        self.total = 0
        self.hidden = False
        self._sizes = {}
        self.loss_sizes = None
        self.touched = False
        self._refs.clear()
        self._mods.clear()
        if self.split and self._mstack is not None:  # the module hooks ran
            self._mstack.reset()
            self._stack = self._mstack.stack

    def _build_map(self):
        """Build the module map (at the first measured forward; False when
        it cannot be had)."""
        from . import _compiled, _modules
        self._map = False
        try:
            if all(self._register):
                self._split = _modules.Split
                self._map = _modules.ModuleMap(self._model())
                self._labels = self._map.labels()
                self._mstack = _modules.ModuleStack(
                    self._map, getattr(self._torch, "Tensor", None) or type(None),
                    _compiled.dynamo_check(self._torch))
                self._stack = self._mstack.stack
        except Exception as exc:  # noqa: BLE001 - attribution is optional
            from . import _safe
            _safe.report(exc)

    # start, start_loss and stop run at every measured forward: what they
    # install and remove is written out in them, not called.
    def start(self):
        """Install the saved-tensor hooks for a model forward (and, when
        ``split``, the module hooks)."""
        self._in_loss = False
        self.touched = True
        if self._ctx is None:
            if self.tensors is None:  # the step's first forward: its walk
                model = self._model()
                walked = self._tree.module_tensors(model) if self._plain else None
                if walked is None:
                    walked = list(model.parameters()), list(model.buffers())
                params, buffers = walked
                self.tensors = (params, buffers)  # static_figures reuses this step's walk
                cache = self._cache
                self.weights = cache.unique_bytes(params + buffers)
                self._exclude = cache.keys
            self._install()
        if self.split and self._mod_hooks is None:
            if self._map is None:
                self._build_map()
            if self._map:
                try:
                    ms = self._mstack
                    ms.stack.clear()  # a forward that raised left its modules there
                    ms.thread = threading.get_ident()
                    pre = self._register[0](ms.pre)
                    try:
                        post = self._register[1](ms.post)
                    except Exception:
                        pre.remove()
                        raise
                    self._mod_hooks = (pre, post)
                except Exception as exc:  # noqa: BLE001
                    from . import _safe
                    _safe.report(exc)

    def start_loss(self):
        """Install the saved-tensor hook for the loss: between the model
        forward's end (after stop()) and the backward's start. Not when the
        forward was not measured, nor under a user's own saved-tensor hooks
        (``save_on_cpu``), which ours would shadow: the loss stays unknown."""
        if self._ctx is not None or not self.touched or not self.split:
            return
        if self._push is not None and (self._hooks.top() is not None
                                       or not self._hooks.enabled()):
            return
        if self.loss_sizes is None:
            self.loss_sizes = []
        self._in_loss = True
        self._install()

    def _install(self):
        # What torch.autograd.graph.saved_tensors_hooks' __enter__ does,
        # without its two Python frames where the binding is there. Under a
        # user's own hooks (save_on_cpu, a checkpoint of the whole model),
        # which ours would shadow, theirs are called through ours. Active
        # even where nothing is pushed: stop() removes the module hooks.
        self.active = True
        push = self._push
        pack = self._pack if self.split else self._lean
        if push is not None:
            hooks = self._hooks
            if not hooks.enabled():  # a push would raise (torch.func.vmap)
                self.hidden = True
                return
            unpack = _unpack
            user = hooks.top()
            if user is not None:
                if not hooks.exact:  # torch 1.13: told by the tracked stack, never called
                    self.hidden = True
                    return
                pack, unpack = self._chained(user[0]), user[1]
            push(pack, unpack)
            self._ctx = _PUSHED
            if hooks.local is not None:
                hooks.local.covered = self._covered
        else:
            ctx = self._torch.autograd.graph.saved_tensors_hooks(pack, _unpack)
            ctx.__enter__()
            self._ctx = ctx

    def stop(self):
        """Remove the saved-tensor and module hooks if installed, and count
        what was saved since they were (:meth:`_tally`)."""
        ctx, self._ctx = self._ctx, None
        self.active = False
        self._in_loss = False
        try:
            hooks = self._mod_hooks
            if hooks is not None:
                self._mod_hooks = None
                hooks[0].remove()
                hooks[1].remove()
        finally:
            if ctx is _PUSHED:
                self._pop()
                if self._hooks.local is not None:
                    self._hooks.local.covered = None
            elif ctx is not None:
                ctx.__exit__(None, None, None)
        if self._refs:
            self._tally()

    def _tally(self):
        """Count the storages behind the aliases packed in a model forward
        since the last tally that are still alive (what autograd holds for
        backward: a graph dropped during the forward took its saved tensors
        with it), each once, parameters, buffers and storages counted
        before left out: into ``total`` and, when ``split``, by the module
        that saved each first."""
        refs, mods = self._refs, self._mods
        try:
            seen, exclude = self._seen, self._exclude
            if not self.split:
                pairs, empty = storages_of(list(filter(_not_none, map(_deref, refs))))
                fresh = dict(pairs)
                new = fresh.keys() - exclude
                if seen:  # a forward of this micro-step was counted before
                    new -= seen.keys()
                    seen.update(fresh)
                else:
                    self._seen = fresh
                if empty:  # a storage that holds no memory now: not counted
                    new = [k for k in new if k[1]]
                if new:
                    self.total += sum(map(fresh.__getitem__, new))
                return
            alive = list(map(_deref, refs))
            mask = list(map(_not_none, alive))
            by_module = self._sizes
            # in the order they were saved: the first saver owns a storage
            for (key, size), i in zip(storages_of(list(compress(alive, mask)))[0],
                                      compress(mods, mask)):
                if not key[1] or key in seen or key in exclude:
                    continue
                if i == LOSS:  # saved after the model's computation (loss_from)
                    seen[key] = LOSS
                    self.loss_sizes.append(size)
                    continue
                self.total += size
                seen[key] = i
                s = by_module.get(i)
                if s is None:
                    by_module[i] = [size]
                else:
                    s.append(size)
        except Exception as exc:  # noqa: BLE001 - the step's other figures stand
            from . import _safe
            _safe.report(exc)
        finally:
            refs.clear()
            mods.clear()

    def mark(self):
        """Where the packs of this forward stand now (a training_step's
        submodule ended here), for :meth:`loss_from`; None when no model
        forward is being measured."""
        return len(self._refs) if self.active and not self._in_loss else None

    def loss_from(self, mark):
        """The model's computation ended at ``mark`` (:meth:`mark`; a
        ``training_step`` that calls the submodules, then computes its
        loss): what was packed since is the loss's, not the model's. With
        the split it is counted as the loss window counts it; without, it
        is left out, as the loss is on a step without the split."""
        refs = self._refs
        n = len(refs) - mark
        if not self.active or self._in_loss or n <= 0:
            return
        if not self.split:
            del refs[mark:]
            return
        self._mods[mark:] = [LOSS] * n
        if self.loss_sizes is None:
            self.loss_sizes = []

    def breakdown(self):
        """Return the ``saved`` object of this micro-step, made when first
        read (:class:`_modules.Split`); None without a module map."""
        if not self._map or not self.split:
            return None
        return self._split(self._labels, self._sizes, self._mstack.inputs,
                           self._seen, self.loss_sizes)

    # The pack hooks run once per tensor autograd saves (hundreds a forward
    # in a real model): in a model forward each keeps a weak reference to
    # what it returns, and stop() counts them all at once (_tally); in the
    # loss window, which a backward that bypasses the wrapper ends from
    # inside the engine after it freed some, each is counted as it is
    # saved. They return an alias, not ``t`` itself: returning an op's own
    # output would make output -> grad_fn -> saved -> output a cycle that
    # outlives a forward without backward. The alias shares storage and
    # version counter. In a tuple, so that the unpack hook, run as often in
    # the backward, is itemgetter(0): no Python frame.
    def _pack(self, t):
        # With the split: and the innermost module running (0: the model's own)
        a = t.detach()
        if self._in_loss:
            self._count_loss(a)
        else:
            self._refs.append(_weakref(a))
            st = self._stack
            self._mods.append(st[-1] if st else 0)
        return (a,)

    def _count_loss(self, t):
        try:
            key, size = storage_of(t)
            seen = self._seen
            if key[1] and key not in seen and key not in self._exclude:
                seen[key] = LOSS
                self.loss_sizes.append(size)
        except Exception as exc:  # noqa: BLE001 - never break autograd
            from . import _safe
            _safe.report(exc)

    def _covered(self):
        """Someone's saved-tensor hooks went on top of the meter's (torch
        1.13, which tells: _saved_hooks): what is saved under them is out of
        sight, and on 1.13 torch's own checkpoint keeps its inputs in a
        closure. The step's figure is unknown."""
        self.hidden = True

    def _chained(self, user_pack):
        """Return the pack hook that calls ``user_pack`` and keeps weak
        references to the tensors its result holds on the saved tensor's
        device (:func:`held_tensors`): what autograd then holds there. A
        result it cannot look into makes the step's figure unknown."""
        refs, mods, ref = self._refs, self._mods, _weakref
        split, tensor = self.split, self._tensor_type

        def pack(t):
            r = user_pack(t)
            try:
                found = held_tensors(r, t.device, tensor)
                if found is None:
                    self.hidden = True
                    return r
                for x in found:
                    refs.append(ref(x))
                    if split:
                        st = self._stack
                        mods.append(st[-1] if st else 0)
            except Exception as exc:  # noqa: BLE001 - never break autograd
                from . import _safe
                _safe.report(exc)
                self.hidden = True
            return r
        return pack

    def _lean_pack(self):
        """Return the pack hook of a step without the split: two C calls
        and an append, the lists bound once (they are cleared in place)."""
        add, ref = self._refs.append, _weakref

        def pack(t):
            a = t.detach()
            add(ref(a))
            return (a,)
        return pack


_unpack = itemgetter(0)

# What a user's pack hook may return beside tensors that holds no device memory
_PLAIN = (int, float, bool, str, bytes)


def held_tensors(packed, device, tensor):
    """The tensors on ``device`` that ``packed``, what a user's pack hook
    returned, holds: itself if a tensor, or those in it if a tuple or a
    list (``save_on_cpu`` returns its device and a copy in host memory).
    Nothing for plain values and torch's checkpoint's placeholders
    (``torch.utils.checkpoint``'s, an index on torch 1.13 and a holder
    object on 2.x: the forward is recomputed in the backward). None for
    anything else, which may hold device memory out of sight."""
    if isinstance(packed, tensor):
        return [packed] if packed.device == device else []
    if isinstance(packed, (tuple, list)):
        out = []
        for x in packed:
            if isinstance(x, tensor):
                if x.device == device:
                    out.append(x)
            elif not (x is None or isinstance(x, _PLAIN) or _torch_value(x)):
                return None
        return out
    if packed is None or isinstance(packed, _PLAIN) \
            or type(packed).__module__ == "torch.utils.checkpoint":
        return []
    return None


def _torch_value(x):
    """A ``torch.device``, ``torch.dtype`` or ``torch.Size``: no memory."""
    return type(x).__name__ in ("device", "dtype", "Size") and type(x).__module__ == "torch"


_PUSHED = object()  # SavedTensorMeter._ctx: the hooks were pushed by the binding
