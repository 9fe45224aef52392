"""Exact tensor accounting: storages, and the static figures of weights,
gradients and optimizer state with the caches that spare their walks
(docs/anatomy.md). The saved activations are :mod:`_meter`'s, when they are
measured :mod:`_schedule`'s.

Every figure counts each *storage* once, keyed by its data pointer, so tied
weights, views and a tensor saved by several ops are not counted twice.
"""


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

    def _held(self, model):
        """The modules of the last walk, the model first, while the walk
        would visit them again; else None."""
        refs = self._mods
        if refs and not self._died:
            try:
                mods = list(map(_deref, refs))
                if mods[0] is model and list(map(id, chain.from_iterable(map(
                        _values, chain.from_iterable(map(_own, map(_dict, mods))))))) \
                        == self._ids:
                    return mods
            except Exception:  # noqa: BLE001 - a module without the dicts: walk
                pass
        return None

    def modules(self, model):
        """Return the modules ``model.modules()`` lists (of a model that
        lists them as torch.nn.Module does: :func:`plain_tree`), or None
        when a module lacks the dicts the walk reads."""
        mods = self._held(model)
        if mods is None and self.module_tensors(model) is not None and self._mods:
            mods = list(map(_deref, self._mods))
        return mods

    def module_tensors(self, model):
        """Return :func:`module_tensors` of ``model``."""
        if self._held(model) is not None:
            return list(map(_deref, self._params)), list(map(_deref, self._buffers))
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
    kind, the optimizer state's StateCache and, for a model that lists its
    tensors as torch.nn.Module does (:func:`plain_tree`), the TreeCache
    that lists them on a step whose meter did not."""

    def __init__(self, tree=False):
        self.weights = StorageCache()
        self.gradients = StorageCache()
        self.optimizer = StorageCache()
        self.state = StateCache()
        self.tree = TreeCache() if tree else None


def optimizer_state(optimizer):
    """The state dict to count of ``optimizer``, or of a tuple of
    optimizers (a watched one and those it holds: _patch.held_optimizers),
    merged under (index, key); None where there is none (a wrapper that
    skipped Optimizer.__init__ may have none)."""
    if not isinstance(optimizer, tuple):
        state = getattr(optimizer, "state", None) if optimizer is not None else None
        return state if isinstance(state, dict) else None
    merged = {}
    for i, opt in enumerate(optimizer):
        state = getattr(opt, "state", None)
        if isinstance(state, dict):
            merged.update(((i, k), v) for k, v in state.items())
    return merged


def static_figures(torch, model, optimizer, cache=None, tensors=None, weights=None):
    """Return weights, gradients, optimizer bytes, params and device.
    ``optimizer``: one, or a tuple of them (:func:`optimizer_state`).

    ``cache``: a :class:`FigureCache` kept between calls (the hook's measured
    steps); ``tensors``: ``(params, buffers)`` already listed this step, and
    ``weights`` their storages' bytes where counted too.
    """
    if cache is None:
        cache = FigureCache()
    if tensors is None and cache.tree is not None:
        tensors = cache.tree.module_tensors(model)
    if tensors is None:
        params, buffers = list(model.parameters()), list(model.buffers())
    else:
        params, buffers = tensors
    if weights is None:
        weights = cache.weights.unique_bytes(params + buffers)
    gradients = cache.gradients.unique_bytes(list(filter(_not_none, map(_grad, params))))
    state = 0
    opt_state = optimizer_state(optimizer)
    if opt_state is not None:
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
