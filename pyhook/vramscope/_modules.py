"""Who holds the saved activations: the module paths a measured step's saved
tensors are attributed to (docs/anatomy.md, "By module").

:class:`ModuleMap` is built once per watched model, at its first measured
step, from ``named_modules()``-style paths. Repeated blocks (siblings with
numeric names, two or more, all of one structure: class and parameter shapes
throughout) are collapsed: ``blocks.0.mlp`` .. ``blocks.3.mlp`` become
``blocks.*.mlp`` with a count of 4. Each module also belongs to one *unit*,
the blocks the advice speaks of: each collapsed block (``blocks.*``), and
otherwise each child of the model, a child holding repeated blocks being
split the same way.

:class:`ModuleStack` tracks the innermost known module running, from global
module forward hooks that :class:`SavedTensorMeter` installs for a measured
forward only.
"""

from collections.abc import Mapping
from operator import itemgetter
from threading import get_ident as _get_ident

from ._anatomy import _getter_of, _getters

TOP_MODULES = 12  # entries of saved.modules; the rest is summed
TOP_BLOCKS = 8  # entries of saved.blocks
MAX_PATH = 256  # bytes of a module path on the wire


def _children(m):
    d = getattr(m, "__dict__", None)
    kids = d.get("_modules") if d is not None else None
    if isinstance(kids, dict):
        return [(n, c) for n, c in kids.items() if c is not None]
    named = getattr(m, "named_children", None)
    return list(named()) if callable(named) else []


def param_owners(model):
    """id(parameter) -> the path of the module that has it, the first in
    ``named_modules()`` order (the model's own: its class name), read from
    the modules' own dicts as :func:`_children` reads them."""
    owners = {}
    stack, seen = [("", model)], {id(model)}
    while stack:
        path, m = stack.pop()
        d = getattr(m, "__dict__", None)
        params = d.get("_parameters") if isinstance(d, dict) else None
        if isinstance(params, dict):
            for p in params.values():
                if p is not None:
                    owners.setdefault(id(p), path or type(model).__name__)
        for name, c in reversed(_children(m)):  # popped in order
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(((path + "." if path else "") + name, c))
    return owners


def _signature(m, memo, depth=0):
    """A hashable summary of ``m``'s structure: class, parameter shapes and
    dtypes, and the same of its children by name."""
    s = memo.get(id(m))
    if s is not None:
        return s
    d = getattr(m, "__dict__", None) or {}
    ps = d.get("_parameters") or {}
    own = tuple((n, tuple(p.shape), str(p.dtype)) for n, p in ps.items() if p is not None)
    kids = () if depth > 64 else tuple(
        (n, _signature(c, memo, depth + 1)) for n, c in _children(m))
    s = (type(m).__module__, type(m).__qualname__, own, kids)
    memo[id(m)] = s
    return s


def _collapsed(m, memo):
    """Report whether ``m``'s numeric children are repeated blocks."""
    nums = [c for n, c in _children(m) if n.isdigit()]
    if len(nums) < 2:
        return False
    first = _signature(nums[0], memo)
    return all(_signature(c, memo) == first for c in nums[1:])


def clip_path(path):
    """Return ``path`` in at most MAX_PATH UTF-8 bytes (its tail kept)."""
    b = path.encode("utf-8", "replace")
    if len(b) <= MAX_PATH:
        return path
    return "…" + b[-(MAX_PATH - 3):].decode("utf-8", "ignore")


class ModuleMap:
    """ModuleMap indexes a model's modules for attribution.

    ``index``: id(module) -> its number ``i`` (the model itself is 0);
    ``label[i]``: the collapsed path (``""`` for the model's own ops);
    ``unit[i]``: the number of the unit module ``i`` belongs to, in
    ``units`` (each ``[label, own_only]``); ``heads``: id(module) -> unit
    number for the modules whose inputs a checkpoint of their unit would keep.
    A module reachable by two paths keeps the first, as ``named_modules()``.
    """

    def __init__(self, model):
        memo = {}
        self._size = 1  # the modules numbered (none of them held: the model's own)
        self.label = [""]
        self.unit = [0]
        self.units = [["", True]]
        self.heads = {}
        self.index = {id(model): 0}
        self._unit_of = {"": 0}
        grouped = self._grouped(model, memo)
        self._walk(model, "", 0, True, memo, grouped)
        self._counts = None
        self.clipped = None  # label -> clip_path(label), made with the counts
        self._labels = None

    def _grouped(self, model, memo):
        """Return the ids of the modules whose subtree holds repeated blocks."""
        out = set()

        def visit(m, seen, depth):
            if id(m) in seen or depth > 64:
                return False
            seen.add(id(m))
            has = _collapsed(m, memo)
            for _, c in _children(m):
                has = visit(c, seen, depth + 1) or has
            if has:
                out.add(id(m))
            return has

        visit(model, set(), 0)
        return out

    def _add_unit(self, label, own):
        u = self._unit_of.get((label, own))
        if u is None:
            u = len(self.units)
            self.units.append([label, own])
            self._unit_of[(label, own)] = u
        return u

    def _walk(self, m, label, unit, splits, memo, grouped, depth=0):
        if depth > 64:
            return
        collapse = _collapsed(m, memo)
        for name, c in _children(m):
            if id(c) in self.index:
                continue
            star = collapse and name.isdigit()
            lab = (label + "." if label else "") + ("*" if star else name)
            if splits and star:
                cu = self._add_unit(lab, False)  # a repeated block: one unit
                self.heads[id(c)] = cu
                csplit = False
            elif splits and id(c) in grouped:
                cu = self._add_unit(lab, True)  # its own ops; its children split
                csplit = True
            elif splits:
                cu = self._add_unit(lab, False)  # a child without repeated blocks
                self.heads[id(c)] = cu
                csplit = False
            else:
                cu, csplit = unit, False
            self.index[id(c)] = self._size
            self._size += 1
            self.label.append(lab)
            self.unit.append(cu)
            self._walk(c, lab, cu, csplit, memo, grouped, depth + 1)

    def labels(self):
        """Return the map's :class:`Labels`: what a split reads, without the
        modules (made once)."""
        if self._labels is None:
            per_label, per_unit = self.counts()
            self._labels = Labels(self.label, self.unit, self.units, per_label, per_unit,
                                  self.clipped)
        return self._labels

    def counts(self):
        """Return {label: number of modules} and {unit: number of head modules}
        (counted once: the map does not change after it is built), and
        fills ``clipped``: each label and unit label as :func:`clip_path`
        makes it."""
        if self._counts is None:
            per_label, per_unit = {}, {}
            for lab in self.label:
                per_label[lab] = per_label.get(lab, 0) + 1
            for u in self.heads.values():
                per_unit[u] = per_unit.get(u, 0) + 1
            clipped = {lab: clip_path(lab) for lab in per_label}
            for lab, _ in self.units:
                clipped[lab] = clip_path(lab)
            self.clipped = clipped
            self._counts = per_label, per_unit
        return self._counts


class Labels:
    """Labels is what :func:`breakdown` reads of a :class:`ModuleMap`
    (``label``, ``unit``, ``units``, ``clipped`` and the counts) and no
    module: a split queued in a message keeps no module, so no tensor,
    alive."""

    __slots__ = ("label", "unit", "units", "clipped", "_counts")

    def __init__(self, label, unit, units, per_label, per_unit, clipped):
        self.label, self.unit, self.units, self.clipped = label, unit, units, clipped
        self._counts = per_label, per_unit

    def counts(self):
        return self._counts


class ModuleStack:
    """ModuleStack follows the innermost known module running a forward.

    ``pre`` and ``post`` are global module forward hooks (installed by the
    meter for a measured forward only). ``stack`` holds module numbers;
    the model itself is not pushed (an empty stack is its own ops).
    ``inputs[u]`` maps the storage keys of the tensor inputs of unit
    ``u``'s head modules (every call) to their bytes.
    """

    def __init__(self, mmap, is_tensor_type, compiling=bool):
        self.map = mmap
        # Whether dynamo traces the call (_compiled.dynamo_check): the hooks
        # stay out of compiled code, where they would break its graph.
        self._compiling = compiling
        self.stack = []
        self.inputs = {}
        self._tensor = is_tensor_type
        self.thread = None  # the thread measured: set by the meter at install
        # The map does not change once built: its lookups bound once.
        self._number = mmap.index.get
        self._head = mmap.heads.get

    def reset(self):
        self.stack = []
        self.inputs = {}

    # The hooks are global: they also see other threads' modules (filtered
    # out by thread) and must never raise into a forward. Each runs at every
    # module call of a measured forward.
    def pre(self, module, args):
        if self._compiling():
            return None
        i = self._number(id(module))
        if not i or _get_ident() != self.thread:  # unknown, or the model itself
            return None
        try:
            self.stack.append(i)
            u = self._head(id(module))
            if u is not None:
                keys = self.inputs.get(u)
                if keys is None:
                    keys = self.inputs[u] = {}
                tensor = self._tensor
                for a in args:
                    if isinstance(a, tensor):
                        # _anatomy.storage_of, inlined
                        cls = type(a)
                        st = (_getters.get(cls) or _getter_of(cls))(a)
                        try:
                            ptr = st.data_ptr()
                        except RuntimeError:  # a storage that holds no memory now
                            continue
                        if ptr:
                            nbytes = getattr(st, "nbytes", None)
                            keys[("cuda" if a.is_cuda else ("cpu" if a.is_cpu else a.device.type),
                                  ptr)] = int(nbytes() if nbytes is not None
                                              else st.size() * st.element_size())
        except Exception as exc:  # noqa: BLE001
            from . import _safe
            _safe.report(exc)
        return None

    def post(self, module, args, output):
        if self._compiling():
            return None
        i = self._number(id(module))
        if not i:
            return None
        stack = self.stack
        if stack and stack[-1] == i:  # the common case: it ends the innermost
            if _get_ident() == self.thread:
                stack.pop()
        elif i in stack and _get_ident() == self.thread:
            # a submodule that raised never ran its post hook: pop past it too
            while stack and stack.pop() != i:
                pass
        return None


_bytes = itemgetter("bytes")
_module = itemgetter("module")


def _rest(entries, top, key):
    # largest first, then by name: two stable sorts, no key function in Python
    if len(entries) > 1:
        entries.sort(key=_module)
        entries.sort(key=_bytes, reverse=True)
    kept, left = entries[:top], entries[top:]
    return kept, {key: len(left), "bytes": sum(map(_bytes, left)) if left else 0}


def breakdown(mmap, sizes, inputs, owner, loss):
    """Return the anatomy message's ``saved`` object.

    ``mmap``: a :class:`ModuleMap` or its :class:`Labels`;
    ``sizes``: module number -> list of the byte sizes of the storages first
    saved while it was the innermost known module; ``inputs``: unit ->
    {storage key: bytes} of its head modules' inputs; ``owner``: storage key
    -> the module number that saved it first (-1: the loss); ``loss``: the
    sizes saved outside the model's forward, or None when that window was
    not measured.

    A unit's ``kept`` is what a checkpoint of it would keep: its inputs'
    distinct storages, less those that tensors saved outside it hold anyway.
    """
    per_label, per_unit = mmap.counts()
    clipped, labels, unit_of, units = mmap.clipped, mmap.label, mmap.unit, mmap.units
    by_label, by_unit = {}, {}
    for i, ss in sizes.items():
        if not ss:
            continue
        total = sum(ss)
        lab = labels[i]
        e = by_label.get(lab)
        if e is None:
            by_label[lab] = {"module": clipped[lab], "count": per_label.get(lab, 1),
                             "bytes": total, "largest": max(ss)}
        else:
            e["bytes"] += total
            e["largest"] = max(e["largest"], max(ss))
        u = unit_of[i]
        b = by_unit.get(u)
        if b is None:
            label, own = units[u]
            by_unit[u] = {"module": clipped[label], "count": per_unit.get(u, 1),
                          "own": own, "bytes": total, "kept": None}
        else:
            b["bytes"] += total
    for u, b in by_unit.items():
        if not b["own"]:
            kept = 0
            for key, size in inputs.get(u, {}).items():
                o = owner.get(key)
                if o is None or (o >= 0 and unit_of[o] == u):
                    kept += size
            b["kept"] = kept
    modules, rest = _rest(list(by_label.values()), TOP_MODULES, "modules")
    blocks, blocks_rest = _rest(list(by_unit.values()), TOP_BLOCKS, "blocks")
    out = {"modules": modules, "rest": rest, "blocks": blocks, "blocks_rest": blocks_rest,
           "loss": None}
    if loss is not None:
        out["loss"] = {"bytes": sum(loss), "largest": max(loss) if loss else 0,
                       "tensors": len(loss)}
    return out


class Split(Mapping):
    """Split is the anatomy message's ``saved`` object: :func:`breakdown` of
    its arguments, made when it is first read. The sender reads it as it
    encodes the message (``_messages``' encoder asks :meth:`json_value`), so
    a measured step's training thread only hands over what its hooks
    counted: containers the meter replaces, never fills again, at its next
    reset. A mapping, as the dict it stands for, to whoever reads the queue."""

    __slots__ = ("_args", "_value")

    def __init__(self, *args):
        self._args = args
        self._value = None

    def json_value(self):
        """Return the ``saved`` object (None when it could not be made)."""
        v = self._value
        if v is None:
            try:
                # pure: made twice at worst when two threads read at once
                v = self._value = breakdown(*self._args)
            except Exception as exc:  # noqa: BLE001 - the totals stand without it
                from . import _safe
                _safe.report(exc)
        return v

    def __getitem__(self, key):
        return self.json_value()[key]

    def __iter__(self):
        return iter(self.json_value())

    def __len__(self):
        return len(self.json_value())

    def __repr__(self):
        return "Split(%r)" % (self.json_value(),)
