"""Exact tensor accounting: weights, gradients, optimizer state and the
activations autograd saves for backward (docs/anatomy.md).

Every figure counts each *storage* once, keyed by its data pointer, so tied
weights, views and a tensor saved by several ops are not counted twice.
"""


import os
import sys
import threading
from functools import partial
from itertools import chain, compress, repeat
from operator import attrgetter, is_ as _is, is_not, itemgetter, methodcaller
from weakref import ref as _weakref

# C-level callables for map(): a list built with them runs no Python frame
_data_ptr = methodcaller("data_ptr")
_numel = methodcaller("numel")
_grad = attrgetter("grad")
_deref = _weakref.__call__
_not_none = partial(is_not, None)
_values = methodcaller("values")
_dict = attrgetter("__dict__")
_nbytes = methodcaller("nbytes")
_device_type = attrgetter("device.type")
_is_cuda = attrgetter("is_cuda")
_is_cpu = attrgetter("is_cpu")
_own = itemgetter("_parameters", "_buffers", "_modules")  # of a module's __dict__

_getters = {}  # tensor class -> its storage accessor (found once per class)


def _getter_of(cls):
    get = (getattr(cls, "untyped_storage", None) or getattr(cls, "_storage", None)
           or cls.storage)
    _getters[cls] = get
    return get


def runs_compiled(model):
    """Whether ``model`` or one of its modules was compiled with
    ``torch.compile`` (an ``OptimizedModule``, which holds ``_orig_mod``) or
    ``Module.compile()`` (``_compiled_call_impl``). The meter's saved-tensor
    and module hooks would run inside the compiled code, where dynamo
    traces them and breaks the graph: measured on torch 2.15 with inductor,
    no call of the model ran compiled any more."""
    if model is None:
        return False
    try:
        for m in model.modules():
            if "_orig_mod" in m._modules or m.__dict__.get("_compiled_call_impl") is not None:
                return True
    except Exception:  # noqa: BLE001 - a module that cannot be walked: not known compiled
        pass
    return False


_DYNAMO_FRAME = os.path.join("torch", "_dynamo", "eval_frame.py")


def in_compiled_call(frame, depth=200):
    """Whether ``frame`` runs under a call that torch.compile compiled: the
    Python frame of dynamo's entry (``torch/_dynamo/eval_frame.py``) is among
    its callers. Walked on measured steps only, and only once dynamo is
    imported (``import torch`` does not import it; a compiled call must)."""
    if "torch._dynamo.eval_frame" not in sys.modules:
        return False
    while frame is not None and depth > 0:
        if frame.f_code.co_filename.endswith(_DYNAMO_FRAME):
            return True
        frame, depth = frame.f_back, depth - 1
    return False


def storage_of(t):
    """Return ``(key, nbytes)`` of the storage behind tensor ``t``.

    Uses ``untyped_storage()`` where it exists (torch >= 2.0), else
    ``_storage()`` (torch 1.13's untyped storage: ``storage()`` wraps it in
    a TypedStorage made in Python on every call, the bulk of a measured
    step's accounting there), else ``storage()``, looked up once per tensor
    class; ``nbytes()`` where it exists, else ``size() * element_size()``.
    """
    key, s = storage_key(t)
    return key, storage_nbytes(s)


def storage_key(t):
    """Return ``(key, storage)`` of tensor ``t``: key is ``(device type, data
    pointer)``, the identity every figure counts a storage once by."""
    cls = type(t)
    s = (_getters.get(cls) or _getter_of(cls))(t)
    try:
        ptr = s.data_ptr()
    except RuntimeError:
        # A storage that holds no memory now: FSDP2 frees an unsharded
        # parameter's between forwards ("invalid python storage").
        # Pointer 0 is what every figure skips.
        ptr = 0
    # t.device makes a torch.device per call; the two flags are plain attributes.
    return ("cuda" if t.is_cuda else ("cpu" if t.is_cpu else t.device.type), ptr), s


def storage_nbytes(s):
    """Return the bytes of storage ``s``."""
    nbytes = getattr(s, "nbytes", None)
    return int(nbytes() if nbytes is not None else s.size() * s.element_size())


_callers = {}  # a storage accessor's name -> its methodcaller
FEW = 8  # storages_of asks fewer tensors than this one by one


def storages_of(tensors):
    """Return ``[storage_of(t) for t in tensors]`` and whether a key has
    pointer 0 (a storage that holds no memory now, which no figure counts),
    asked in C: maps of the storage method by name (the one
    :func:`_getter_of` finds for the first tensor's class; each tensor
    answers its own), the storage's data pointer and ``nbytes()``, the
    device from two flags; tensor by tensor where a storage cannot answer
    so."""
    if len(tensors) < FEW:
        # storage_of written out: fewer maps' setup than the tensors' own work
        out, empty = [], False
        for t in tensors:
            cls = type(t)
            st = (_getters.get(cls) or _getter_of(cls))(t)
            try:
                ptr = st.data_ptr()
            except RuntimeError:  # a storage that holds no memory now
                ptr = 0
            if not ptr:
                empty = True
            nbytes = getattr(st, "nbytes", None)
            out.append((("cuda" if t.is_cuda else ("cpu" if t.is_cpu else t.device.type), ptr),
                        int(nbytes() if nbytes is not None else st.size() * st.element_size())))
        return out, empty
    cls = type(tensors[0])
    name = (_getters.get(cls) or _getter_of(cls)).__name__
    get = _callers.get(name) or _callers.setdefault(name, methodcaller(name))
    try:
        storages = list(map(get, tensors))
        ptrs = list(map(_data_ptr, storages))
        sizes = list(map(_nbytes, storages))
        cuda = list(map(_is_cuda, tensors))
        devices = repeat("cuda") if all(cuda) else (
            repeat("cpu") if not any(cuda) and all(map(_is_cpu, tensors))
            else map(_device_type, tensors))
        return list(zip(zip(devices, ptrs), sizes)), 0 in ptrs
    except (RuntimeError, AttributeError, TypeError):
        # a storage that holds no memory now, or one without nbytes()
        pairs = list(map(storage_of, tensors))
        return pairs, any(not k[1] for k, _ in pairs)


def _add(seen, t):
    key, size = storage_of(t)
    if key[1] == 0 or key in seen:
        return 0
    seen[key] = size
    return size


def unique_bytes(tensors):
    """Return the total bytes of the distinct storages behind ``tensors``."""
    seen = {}
    return sum(_add(seen, t) for t in tensors)


def _tensors_in(obj, is_tensor, depth=0):
    if is_tensor(obj):
        yield obj
    elif depth < 4 and isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors_in(v, is_tensor, depth + 1)
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors_in(v, is_tensor, depth + 1)


def state_tensors(opt_state, tensor_type, is_tensor):
    """Return the tensors in an optimizer's ``state`` values, as
    ``list(_tensors_in(list(opt_state.values()), is_tensor))`` lists them,
    with the usual shape (a dict of tensors and numbers per parameter)
    walked without generators (a measured step walks it once)."""
    out = []
    for st in opt_state.values():
        if type(st) is dict:
            for v in st.values():
                if isinstance(v, tensor_type):
                    out.append(v)
                elif isinstance(v, (dict, list, tuple)):
                    out.extend(_tensors_in(v, is_tensor, 2))
        else:
            out.extend(_tensors_in(st, is_tensor, 1))
    return out


# Values of an optimizer's per-parameter state that hold no tensor (besides tensors)
_LEAVES = frozenset((int, float, bool, complex, str, type(None)))


class StateCache:
    """StateCache answers :func:`state_tensors` for an optimizer state
    whose per-parameter dicts hold the same tensors as at the last walk.

    An optimizer keeps its state tensors (moments, momentum buffers, step
    counters) from step to step and updates them in place. A call takes the
    values of every per-parameter dict again in C and compares their types
    with the last walk's and, where those were tensors, their ids, while a
    weak-reference callback says none of those tensors died (so none's id
    was reused): the same, in the same order, and the walk would list the
    same tensors. Only the usual shape is answered so: every entry a
    dict, every value a tensor or a number, string or None (numbers may
    change: they hold no tensor). Anything else (an entry added or dropped
    with tensors in it, a tensor replaced or freed, a container value)
    walks. Weak references only.
    """

    def __init__(self):
        self._types = None  # the type of every value, in order; None: walk
        self._mask = ()  # which values were tensors
        self._ids = ()  # their ids
        self._answer = ()  # weak references to them, whose callbacks note a death
        self._died = []

    def tensors(self, opt_state, tensor_type, is_tensor):
        """Return :func:`state_tensors` of ``opt_state``."""
        types = self._types
        if types is not None and not self._died:
            try:
                sts = list(opt_state.values())
                if all(map(_is, map(type, sts), repeat(dict))):
                    vals = list(chain.from_iterable(map(_values, sts)))
                    if list(map(type, vals)) == types:
                        tensors = list(compress(vals, self._mask))
                        if list(map(id, tensors)) == self._ids:
                            return tensors
            except Exception:  # noqa: BLE001 - a state that cannot be read so: walk
                pass
        out = state_tensors(opt_state, tensor_type, is_tensor)
        self._types = None
        try:
            sts = list(opt_state.values())
            if all(type(st) is dict for st in sts):
                vals = list(chain.from_iterable(map(_values, sts)))
                types = list(map(type, vals))
                mask = [isinstance(v, tensor_type) for v in vals]
                if all(m or t in _LEAVES for m, t in zip(mask, types)):
                    died = []
                    note = died.append  # a C callback: no frame, no reference to self
                    tensors = list(compress(vals, mask))
                    self._answer = [_weakref(t, note) for t in tensors]
                    self._ids, self._died = list(map(id, tensors)), died
                    self._mask, self._types = mask, types
        except Exception:  # noqa: BLE001 - something not weakly referable: walk each time
            self._types = None
        return out


# Module methods a model must not override for module_tensors' own walk to
# list what model.parameters() and model.buffers() list.
_WALKED = ("parameters", "buffers", "named_parameters", "named_buffers", "modules",
           "named_modules", "_named_members", "children", "named_children")


def plain_tree(torch, model):
    """Report whether ``model`` lists its tensors as torch.nn.Module does
    (none of _WALKED overridden), so :func:`module_tensors` may walk it."""
    base = getattr(getattr(torch, "nn", None), "Module", None)
    if base is None or not isinstance(model, base):
        return False
    cls = type(model)
    return all(getattr(cls, n, None) is getattr(base, n, None) for n in _WALKED)


def module_tensors(model, visited=None):
    """Return ``(params, buffers)`` as ``list(model.parameters())`` and
    ``list(model.buffers())`` give them (pre-order, each module and tensor
    once, None entries left out) from one walk over the modules' own
    ``_parameters``, ``_buffers`` and ``_modules`` dicts; None when a module
    lacks them (the caller asks torch then). torch's two generator walks
    cost a measured step ~10 us on the tiny benchmark MLP. ``visited``, a
    list, receives the modules walked, in order."""
    params, buffers = [], []
    seen_m, seen_t = {id(model)}, set()
    stack = [model]
    while stack:
        m = stack.pop()
        if visited is not None:
            visited.append(m)
        d = getattr(m, "__dict__", None)
        if d is None:
            return None
        ps, bs, ms = d.get("_parameters"), d.get("_buffers"), d.get("_modules")
        if not isinstance(ps, dict) or not isinstance(bs, dict) or not isinstance(ms, dict):
            return None
        for p in ps.values():
            if p is not None and id(p) not in seen_t:
                seen_t.add(id(p))
                params.append(p)
        for b in bs.values():
            if b is not None and id(b) not in seen_t:
                seen_t.add(id(b))
                buffers.append(b)
        if ms:
            kids = [c for c in ms.values() if c is not None and id(c) not in seen_m]
            for c in kids:
                seen_m.add(id(c))
            kids.reverse()
            stack.extend(kids)
    return params, buffers


class TreeCache:
    """TreeCache answers :func:`module_tensors` for a model whose modules
    hold what they held at the last walk.

    It keeps the ids of every value of the walked modules' ``_parameters``,
    ``_buffers`` and ``_modules`` dicts (in order, None entries included),
    a weak reference to each module and value, whose callback notes that it
    died, and the walk's answer, by weak reference. A call takes the same
    dicts of the same modules again, in C (``map`` over
    ``attrgetter``/``methodcaller``): while nothing the walk saw has died,
    no other object can have the id of one of them, so the same ids in the
    same order are the same objects; the walk would visit the same modules
    in the same order and list the same tensors, and the answer is
    returned without it. Anything else (a module, parameter or buffer
    added, removed, replaced or freed, a dict reordered, a module without
    the dicts) walks again. Weak references only: no module or tensor is
    kept alive.
    """

    def __init__(self):
        self._mods = ()  # weak references to the walked modules, the model first
        self._ids = None  # ids of their dicts' values, in order
        self._params = self._buffers = ()  # weak references to the answer
        self._watched = ()  # weak references to the values, for their callbacks
        # What the weak references' callbacks append to (one list per walk)
        self._died = []

    def module_tensors(self, model):
        """Return :func:`module_tensors` of ``model``."""
        refs = self._mods
        if refs and not self._died:
            try:
                mods = list(map(_deref, refs))
                if mods[0] is model and list(map(id, chain.from_iterable(map(
                        _values, chain.from_iterable(map(_own, map(_dict, mods))))))) \
                        == self._ids:
                    return list(map(_deref, self._params)), list(map(_deref, self._buffers))
            except Exception:  # noqa: BLE001 - a module without the dicts: walk
                pass
        mods = []
        walked = module_tensors(model, mods)
        self._mods = ()
        if walked is not None:
            try:
                died = []
                note = died.append  # a C callback: no frame, no reference to self
                vals = list(chain.from_iterable(map(
                    _values, chain.from_iterable(map(_own, map(_dict, mods))))))
                self._watched = [_weakref(v, note) for v in vals if v is not None]
                self._ids = list(map(id, vals))
                self._params = list(map(_weakref, walked[0]))
                self._buffers = list(map(_weakref, walked[1]))
                self._mods = [_weakref(m, note) for m in mods]
                self._died = died
            except Exception:  # noqa: BLE001 - something not weakly referable: walk each time
                self._mods = ()
        return walked


class StorageCache:
    """StorageCache remembers the bytes of the storages behind its last
    call's tensors.

    Parameters, buffers and optimizer state are the same tensor objects from
    one measured step to the next; a measured step compares their ids and
    ``data_ptr()`` with the last call's (maps in C) instead of asking for
    their storages again (:func:`storages_of`). Any change (a tensor added,
    dropped or replaced, data moved by ``p.data = ...``, ``set_``,
    ``.to()``) asks them all again. The cache holds weak references only: a
    tensor the model or optimizer drops (a gradient
    ``zero_grad(set_to_none=True)`` releases, a cleared optimizer state) is
    freed at once, as without the hook, and its death (a callback) makes
    the next call ask again, so a new tensor that reuses its id is never
    taken for it.
    """

    def __init__(self):
        self._watched = ()  # weak references to the last call's tensors, for their callbacks
        # The last call's answer and what it was for: the same tensor objects
        # at the same data pointers (weights and optimizer state, step after
        # step) get it back after two maps in C. The same ids are the same
        # objects while none of those died (then no other object has their
        # ids): the weak references' callbacks say a death.
        self._ptrs = self._ids = None
        self._died = []
        self._note = self._died.append  # a C callback: no frame, no reference to self
        self._total = 0
        self.keys = frozenset()  # the storage keys of the last call's tensors

    def unique_bytes(self, tensors):
        """Return the bytes of the distinct storages behind ``tensors``
        (and keep their storage keys in ``keys``)."""
        ids = list(map(id, tensors))
        ptrs = list(map(_data_ptr, tensors))
        if ids == self._ids and ptrs == self._ptrs and not self._died:
            return self._total
        died = self._died
        died.clear()  # deaths before this call are of tensors it looks up afresh
        self._watched = list(map(_weakref, tensors, repeat(self._note)))
        pairs, empty = storages_of(tensors)
        fresh = dict(pairs)  # each storage once
        total = sum(fresh.values())
        if empty:
            total -= sum(n for k, n in fresh.items() if not k[1])
        self.keys = frozenset(fresh)
        self._ids, self._ptrs, self._total = ids, ptrs, total
        return total


class FigureCache:
    """The per-watch caches of :func:`static_figures`: one StorageCache per
    kind, and the optimizer state's StateCache."""

    def __init__(self):
        self.weights = StorageCache()
        self.gradients = StorageCache()
        self.optimizer = StorageCache()
        self.state = StateCache()


def static_figures(torch, model, optimizer, cache=None, tensors=None, weights=None):
    """Return weights, gradients, optimizer bytes, params and device.

    ``cache``: a :class:`FigureCache` kept between calls (the hook's measured
    steps); ``tensors``: ``(params, buffers)`` already listed this step, and
    ``weights`` their storages' bytes where counted too.
    """
    if tensors is None:
        params, buffers = list(model.parameters()), list(model.buffers())
    else:
        params, buffers = tensors
    if cache is None:
        cache = FigureCache()
    if weights is None:
        weights = cache.weights.unique_bytes(params + buffers)
    gradients = cache.gradients.unique_bytes(list(filter(_not_none, map(_grad, params))))
    state = 0
    opt_state = getattr(optimizer, "state", None) if optimizer is not None else None
    if isinstance(opt_state, dict):  # a wrapper that skipped Optimizer.__init__ may have none
        state = cache.optimizer.unique_bytes(
            cache.state.tensors(opt_state, torch.Tensor, torch.is_tensor))
    first = params[0] if params else (buffers[0] if buffers else None)
    return {
        "weights": weights,
        "gradients": gradients,
        "optimizer": state,
        "params": sum(map(_numel, params)),
        "device": first.device.type if first is not None else "cpu",
    }


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
        self._model = model
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
        ag = getattr(getattr(torch, "_C", None), "_autograd", None)
        # torch >= 2.0: the saved-tensor hooks in force, to leave a user's own alone
        self._top_hooks = getattr(ag, "_top_saved_tensors_default_hooks", None)
        # The bindings saved_tensors_hooks enters and exits by (1.13 and 2.x)
        self._push = getattr(ag, "_push_saved_tensors_default_hooks", None)
        self._pop = getattr(ag, "_pop_saved_tensors_default_hooks", None)
        if self._push is None or self._pop is None:
            self._push = self._pop = None
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

    def reset(self):
        """Forget what was counted (start of a new micro-step). Nothing is
        counted but after start(), which sets ``touched``: a meter not
        touched since its last reset is left as it is."""
        if not self.touched:
            return
        self._seen = {}
        self.total = 0
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
        from . import _modules
        self._map = False
        try:
            if all(self._register):
                self._split = _modules.Split
                self._map = _modules.ModuleMap(self._model)
                self._labels = self._map.labels()
                self._mstack = _modules.ModuleStack(
                    self._map, getattr(self._torch, "Tensor", None) or type(None))
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
                walked = self._tree.module_tensors(self._model) if self._plain else None
                if walked is None:
                    walked = list(self._model.parameters()), list(self._model.buffers())
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
        top = self._top_hooks
        if top is not None and top(False) is not None:
            return
        if self.loss_sizes is None:
            self.loss_sizes = []
        self._in_loss = True
        self._install()

    def _install(self):
        # What torch.autograd.graph.saved_tensors_hooks' __enter__ does,
        # without its two Python frames where the binding is there.
        push = self._push
        pack = self._pack if self.split else self._lean
        if push is not None:
            push(pack, _unpack)
            self._ctx = _PUSHED
        else:
            ctx = self._torch.autograd.graph.saved_tensors_hooks(pack, _unpack)
            ctx.__enter__()
            self._ctx = ctx
        self.active = True

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
                seen[key] = -1
                self.loss_sizes.append(size)
        except Exception as exc:  # noqa: BLE001 - never break autograd
            from . import _safe
            _safe.report(exc)

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


_PUSHED = object()  # SavedTensorMeter._ctx: the hooks were pushed by the binding


FIRST_MEASURED = 3  # steps 0, 1 and 2 are always measured
REMEASURE_RATIO = 2.0  # re-measure at most once per doubling of the input
# The split by module is taken again at least once in this many measured
# steps, and when a measured total moved by more than 1/SPLIT_NOISE of the
# total the last split was taken at.
SPLIT_EVERY = 10
SPLIT_NOISE = 100


def size_ratio(batch, tokens, measured):
    """Return the input-size ratio of (batch, tokens) to a measurement: tokens
    when both sides know them, else batch; None when neither compares."""
    if tokens is not None and measured.get("tokens"):
        return tokens / measured["tokens"]
    if batch is not None and measured.get("batch"):
        return batch / measured["batch"]
    return None


class Activations:
    """Activations decides when saved activations are measured and how fresh
    the figure each anatomy message carries is (docs/protocol.md, the anatomy's
    activations fields).

    Steps 0-2 and every ``every``-th step are measured. A step whose first
    training forward is at least twice the input size of the last measurement
    is measured too (so at most once per doubling); any other step whose input
    size differs from the last anatomy sent gets an anatomy message whose
    activations are the last measurement scaled by the size ratio, labelled
    ``"scaled"``.

    A measured step takes the split by module (the message's ``saved``,
    docs/anatomy.md "By module") when it is one of steps 0-2 or the first
    measured step of the watch, when its input size differs from the
    split's, when the split's loss was not measured, when the last measured
    total moved beyond the noise (SPLIT_NOISE) from the split's, and at
    least once in SPLIT_EVERY measured steps; the others measure the total
    alone (``saved`` null: the monitor keeps the last split, labelled with
    its step and total).
    """

    def __init__(self, meter, every):
        self.meter = meter
        self.every = every
        self.static = None  # the last static_figures(), reused by scaled messages
        self.measured = None  # {"step", "batch", "tokens", "activations"}
        self.sent = None  # (batch, tokens) of the last anatomy message
        # (batch, tokens) last compared with the measurement (read by the
        # Watcher's inlined note_input)
        self.checked = None
        self.scheduled = False
        self.hold = False  # a census is due: keep scheduling (CensusMixin)
        self.measuring = False
        self.remeasured = False
        self.total = None
        self.batch = None
        self.tokens = None
        self.saved = None  # the measured micro-step's by-module breakdown
        self.step = None  # the step prepared
        # The last split taken: (batch, tokens, activations, whether its
        # loss was measured); None before the first.
        self.split = None
        self.unsplit = 0  # measured steps since, without the split
        self.split_due = False  # a measured total moved: the next one splits
        self.split_loss = False  # the step's split has its loss

    def scheduled_at(self, step):
        """Report whether ``step`` is measured by the schedule."""
        return step < FIRST_MEASURED or (self.every > 0 and step % self.every == 0)

    def breakdown_at(self, step):
        """Report whether ``step`` reads every phase by the schedule (a
        breakdown step, docs/protocol.md "Exact peaks"): steps 0-2, then
        one in ``every``, halfway between two measured steps, so that no
        measured step pays for the phase reads too (none with ``every`` < 2)."""
        every = self.every
        return step < FIRST_MEASURED or (every > 1 and step % every == every // 2)

    def schedule(self, step):
        """Return whether the schedule measures ``step``, whether it reads
        its phases (:meth:`breakdown_at`), and the first step after it that
        it measures or reads so (1 << 62 when no later step is)."""
        nxt = step + 1
        every = self.every
        if nxt < FIRST_MEASURED:
            after = nxt
        elif every <= 0:
            after = 1 << 62
        else:
            after = -(-nxt // every) * every  # the next measured step
            if every > 1:
                half = after - every + every // 2  # the breakdown before it
                if half >= nxt:
                    after = half
        # scheduled_at and breakdown_at, written out
        if step < FIRST_MEASURED:
            return True, True, after
        if every <= 0:
            return False, False, after
        return step % every == 0, every > 1 and step % every == every // 2, after

    def prepare(self, step):
        """Start bookkeeping for ``step``; an unmeasured step touches no meter.
        While ``hold`` is set (a census is due) every step ends as a
        scheduled one, measured or not by the schedule alone."""
        every = self.every
        measured = step < FIRST_MEASURED or (every > 0 and step % every == 0)  # scheduled_at
        self.scheduled = measured or self.hold
        meter = self.meter
        self.measuring = meter is not None and measured
        self.remeasured = False
        self.total = None
        self.saved = None
        self.split_loss = False
        self.step = step
        self.batch = self.tokens = None
        if meter is not None:
            if measured and meter.touched:  # (reset's own test)
                meter.reset()
            meter.tensors = meter.weights = None  # a measured step's start() lists them again

    def note_input(self, size):
        """Record a training forward's input size (the step keeps the largest)."""
        first = self.batch is None and self.tokens is None
        b, t = size.get("batch"), size.get("tokens")
        if b is not None and (self.batch is None or b > self.batch):
            self.batch = b
        if t is not None and (self.tokens is None or t > self.tokens):
            self.tokens = t
        if first and not self.measuring and self.meter is not None \
                and self.measured is not None and (b, t) != self.checked:
            self.checked = (b, t)  # a size seen before was checked then
            r = size_ratio(self.batch, self.tokens, self.measured)
            if r is not None and r >= REMEASURE_RATIO:
                self.measuring = True
                self.remeasured = True
                self.meter.reset()
                self.meter.tensors = self.meter.weights = None  # walked at its start

    def start(self):
        """Install the meter for a training forward of a measured step."""
        if self.measuring:
            # in_compiled_call's first test, written out: no frame walked
            # before dynamo is imported
            if "torch._dynamo.eval_frame" in sys.modules and in_compiled_call(sys._getframe(1)):
                # The model was compiled after watch() (or is called from
                # compiled code, as the HF Trainer's torch_compile does):
                # the meter's hooks would run inside it (runs_compiled).
                self.meter, self.measuring = None, False
                return
            if self.total is None:  # the step's first measured forward
                self.total = 0
                last = self.split
                self.meter.split = (
                    last is None or self.step < FIRST_MEASURED or self.split_due
                    or not last[3] or self.unsplit + 1 >= SPLIT_EVERY
                    or self.batch != last[0] or self.tokens != last[1])
            self.meter.start()

    def pause(self):
        """Remove the meter's hooks, keeping what it counted."""
        meter = self.meter
        if meter is not None and meter.active:
            meter.stop()

    stop = pause

    def forward_done(self):
        """The model's forward ended with an output to train on, its
        backward to come through the wrapper (a measured step): pause, and
        on a step that takes the split count what is saved until the
        backward starts as the loss's."""
        meter = self.meter
        if meter.active:
            meter.stop()
        if meter.split and self.total is not None:
            meter.start_loss()

    def collect(self):
        """Fold the current micro-step's count into the step's (the largest
        wins, with its breakdown by module)."""
        if not self.measuring or self.total is None:
            return
        meter = self.meter
        if meter.active:  # pause(), written out
            meter.stop()
        if not meter.touched:
            return  # nothing counted since the last collect (reset's own test)
        if meter.split and (self.saved is None or meter.total > self.total):
            try:
                self.saved = meter.breakdown()
                self.split_loss = meter.loss_sizes is not None
            except Exception as exc:  # noqa: BLE001 - the totals stand without it
                from . import _safe
                _safe.report(exc)
        self.total = max(self.total, meter.total)
        meter.reset()

    def finish(self, step):
        """Return the activation fields of ``step``'s anatomy message (plus its
        ``batch``), or None when the step sends none."""
        size = (self.batch, self.tokens)
        if not self.measuring and not self.scheduled and size == self.sent:
            return None  # the common step: nothing measured, nothing new to say
        meter = self.meter
        if self.measuring and (meter.active or meter.touched):
            self.collect()  # (its own tests, but for the count it took)
        if self.measuring and self.total is not None:
            self.checked = size  # its own size: nothing to compare later
            self.measured = {"step": step, "batch": self.batch, "tokens": self.tokens,
                             "activations": self.total}
            # the split taken, or a step without it and whether its total moved
            if meter.split:
                self.split = (self.batch, self.tokens, self.total, self.split_loss)
                self.unsplit = 0
                self.split_due = False
            else:
                self.unsplit += 1
                last = self.split
                if last is not None and abs(self.total - last[2]) > last[2] // SPLIT_NOISE:
                    self.split_due = True
            self.sent = size
            return {"activations": self.total, "activations_step": step,
                    "activations_batch": self.batch, "activations_tokens": self.tokens,
                    "activations_source": "measured", "tokens": self.tokens,
                    "batch": self.batch, "saved": self.saved}
        known = self.batch is not None or self.tokens is not None
        if self.scheduled or (self.measured is not None and known and size != self.sent):
            if known:
                self.sent = size
            return self._scaled()
        return None

    def _scaled(self):
        m = self.measured
        r = size_ratio(self.batch, self.tokens, m) if m is not None else None
        out = {"tokens": self.tokens, "batch": self.batch, "activations": None,
               "activations_step": None, "activations_batch": None,
               "activations_tokens": None, "activations_source": None}
        if r is not None:
            out.update(activations=int(round(m["activations"] * r)),
                       activations_step=m["step"], activations_batch=m["batch"],
                       activations_tokens=m["tokens"], activations_source="scaled")
        return out
