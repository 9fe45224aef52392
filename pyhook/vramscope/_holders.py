"""Who holds a tensor: the nearest named root that keeps it alive (docs/census.md).

From a set of tensors, follow ``gc.get_referrers`` upward a few hops, one
walk of the collector's objects per hop for the whole set, until each tensor
reaches a root with a name: a local of a frame (function, file, line), a
module global, an attribute of an object (``Encoder.cache``), or an item of a
container that itself has such a name (``losses[...]``,
``history["grad_norm"]``). The search stops at its time budget; what it did
not reach is left unattributed, never guessed.
"""

import linecache
import os
import re
import sys
import time
import types

from ._tracebacks import HOOK_DIR, hook_code

HOPS = 4  # referrer walks at most (tensor -> list -> dict -> owner)
_MAX_SCAN_LINES = 2000
MAX_PENDING = 64  # objects per referrer walk (the walk compares each with every one)


def _skipped_frame(frame):
    """The hook's own frames (the census's locals are no holders)."""
    return hook_code(frame.f_code)


_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, its locals fast slots


def release_locals():
    """Drop the ``f_locals`` snapshots a census made on this thread's
    function frames. Python 3.12 and older cache one dict per frame at the
    first read, and it keeps every value it saw alive until the next read:
    a step's loss and its graph, or its logits, would outlive the user's
    own rebinding (3.13's ``f_locals`` is a view that caches none). A
    snapshot is refilled from the frame at every read, so clearing it loses
    nothing. Only this thread's: another thread stopped inside a Python
    trace function writes its snapshot back into its locals when the
    tracer returns (its snapshots stay, docs/census.md)."""
    if sys.version_info >= (3, 13):
        return
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_flags & _CO_OPTIMIZED and not _skipped_frame(f):
            try:
                f.f_locals.clear()
            except Exception:  # noqa: BLE001 - a frame being torn down
                pass
        f = f.f_back


def _module_dicts():
    """``{id(module.__dict__): module name}`` of the loaded modules."""
    out = {}
    for name, mod in list(sys.modules.items()):
        d = object_dict(mod)
        if d is not None:
            out[id(d)] = (name, _file_of(mod))
    return out


def _file_of(mod):
    """A module's ``__file__`` from its dict: a lazy module's ``__getattr__``
    (PEP 562) is never run."""
    d = object_dict(mod)
    f = d.get("__file__") if d is not None else None
    return f if isinstance(f, str) else None


def _key_text(k):
    if isinstance(k, str):
        return '"%s"' % k[:48]
    if isinstance(k, int):
        return str(k)
    return "..."


class Root:
    """Root is a named holder: kind (``local``, ``global``, ``attr``), the
    name with the path from it to the tensors (``losses[...]``), the type of
    the object that holds the tensors directly, and where in the source."""

    __slots__ = ("kind", "name", "container", "function", "file", "line", "obj")

    def __init__(self, kind, name, container, function=None, file=None, line=None, obj=None):
        self.kind, self.name, self.container = kind, name, container
        self.function, self.file, self.line = function, file, line
        self.obj = obj  # what the root names (the list, the dict, the tensor)

    def key(self):
        return (self.kind, self.name, self.function, self.file)


def _write_line(path, first, last, name):
    """The first line in ``path`` between ``first`` and ``last`` that adds to
    ``name`` (``name.append(``, ``name +=``, ``name[...] =``, ``name = ``),
    else None."""
    if not path:
        return None
    leaf = re.escape(name.rsplit(".", 1)[-1])
    pat = re.compile(r"(^|[^\w.])(self\.)?" + leaf
                     + r"(\s*\.\s*(append|extend|insert|add|update|setdefault)\s*\(|\s*\+=|\s*\[[^\]]*\]\s*=[^=]|\s*=[^=])")
    lines = linecache.getlines(path)
    hit = None
    for n in range(max(first, 1), min(last, len(lines), first + _MAX_SCAN_LINES) + 1):
        text = lines[n - 1].split("#", 1)[0]
        m = pat.search(text)
        if m:
            if m.group(3).lstrip().startswith("=") and hit is None:
                hit = n  # a plain assignment: kept unless something adds to it
                continue
            if not m.group(3).lstrip().startswith("="):
                return n
    return hit


def items_of(obj):
    """``obj``'s entries as ``(key, value)`` pairs (key None for a sequence
    or a set), read through the built-in type's own methods, so a subclass
    that overrides iteration (a lazy container) runs none of its code."""
    if isinstance(obj, dict):
        return list(dict.items(obj))
    return [(None, v) for v in values_of(obj)]


def values_of(obj):
    """``obj``'s values (a dict's, a sequence's, a set's), as items_of reads
    them; [] for anything else."""
    if isinstance(obj, dict):
        return list(dict.values(obj))
    for base in (list, tuple, set, frozenset):
        if isinstance(obj, base):
            return list(base.__iter__(obj))
    return []


_PLAIN_DICT = {}  # class -> whether its __dict__ is Python's own slot


def _plain_dict(cls):
    ok = _PLAIN_DICT.get(cls)
    if ok is None:
        found = None
        for k in cls.__mro__:
            found = k.__dict__.get("__dict__")
            if found is not None:
                break
        # ModuleType's and every plain class's: the interpreter's descriptor
        ok = found is None or isinstance(found, (types.GetSetDescriptorType, types.MemberDescriptorType))
        _PLAIN_DICT[cls] = ok
    return ok


def object_dict(obj):
    """``obj``'s instance ``__dict__``, or None, without running its
    class's code: a class that defines ``__dict__`` itself (a property) is
    not read."""
    if not _plain_dict(type(obj)):
        return None
    try:
        d = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None
    return d if type(d) is dict else None


def _render(segs, owner_is_object=False):
    """Text of a path from a root down to the tensors: ``[...]`` for a
    sequence's item, ``["k"]`` for a dict's key, ``.k`` for an attribute
    (a dict that is an object's ``__dict__``)."""
    out = []
    for i, (kind, k) in enumerate(segs):
        if kind == "key" and i == 0 and owner_is_object:
            out.append("." + k)
        elif kind == "key":
            out.append("[%s]" % _key_text(k))
        else:
            out.append("[...]")
    return "".join(out)


def _frame_root(frame, target, segs, direct):
    code = frame.f_code
    try:
        local = frame.f_locals
        module = local is frame.f_globals  # a module's top level: its globals
    except Exception:  # noqa: BLE001 - a frame being torn down
        return None
    for name, value in list(local.items()):
        if value is target:
            line = _write_line(code.co_filename, code.co_firstlineno, 10 ** 9, name)
            if module:
                return Root("global", name + _render(segs), direct or type(target).__name__,
                            frame.f_globals.get("__name__"), code.co_filename,
                            line or frame.f_lineno, target)
            return Root("local", name + _render(segs), direct or type(target).__name__,
                        code.co_name, code.co_filename, line or frame.f_lineno, target)
    return None


def _class_file(obj):
    return _file_of(sys.modules.get(type(obj).__module__))


# nn.Module keeps registered buffers and parameters in these dicts: the
# attribute is the key.
_MODULE_DICTS = ("_buffers", "_parameters", "_modules")


DOWN_DEPTH = 4  # levels below a named root the downward search looks
DOWN_VISITS = 2000000  # objects it visits at most
_PREFIXES = {p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix) if p}
_LIBRARY_DIRS = tuple(sorted({os.path.join(q, "") for p in _PREFIXES
                              for q in (p, os.path.realpath(p))}))


def _user_modules():
    """``[(name, module)]`` of the modules not installed under Python's
    prefixes (the user's own code, ``__main__`` included), the hook left out.
    Paths are compared as written (no realpath: a lstat per module)."""
    out = []
    for name, mod in list(sys.modules.items()):
        f = _file_of(mod)
        if name == "__main__" or (isinstance(f, str) and not f.startswith(_LIBRARY_DIRS)
                                  and not f.startswith(HOOK_DIR)):
            out.append((name, mod))
    return out


def _expandable_type(cls, tensor):
    """Whether the downward search looks inside instances of ``cls``:
    containers, and classes whose instances have attributes, but not
    classes, modules, functions, strings, tensors or the hook's own."""
    if issubclass(cls, (list, tuple, set, frozenset, dict)):
        return True
    if issubclass(cls, (type, types.ModuleType, types.FunctionType, types.MethodType,
                        types.BuiltinFunctionType, types.CodeType, types.FrameType, str, bytes,
                        int, float, complex, bool)) \
            or (tensor is not None and issubclass(cls, tensor)):
        return False
    return getattr(cls, "__dictoffset__", 0) != 0 and not cls.__module__.startswith("vramscope")


class Down:
    """Down searches from the named roots down: every thread's frame
    locals, then the user's modules' globals, breadth first, DOWN_DEPTH
    levels into containers and object attributes (an attribute is a root of
    its own: ``Encoder.cache``). Its first hit on a target is the target's
    nearest named root. Cheap where the user's data is small, whatever the
    number of objects the collector tracks; what it does not reach is left
    to the referrer walk."""

    def __init__(self, deadline, frames, tensor=None):
        self.deadline = deadline
        self.frames = frames
        self.tensor = tensor
        self.visits = 0
        self.complete = True

    def roots(self, targets):
        want = {id(t) for t in targets}
        found = {}
        seen = set()
        kinds = {}
        tensor = self.tensor
        level = []  # (obj, root spec, path segments, type name of obj's container)

        def offer(v, spec, segs, direct):
            vid = id(v)
            if vid in want:
                if vid not in found:
                    found[vid] = self._root(spec, segs, direct, v)
                return
            cls = type(v)
            e = kinds.get(cls)
            if e is None:
                e = kinds[cls] = _expandable_type(cls, tensor)
            if e and vid not in seen:
                nxt.append((v, spec, segs, direct))

        nxt = level
        for f in self.frames:
            try:
                local = f.f_locals
                module = local is f.f_globals
            except Exception:  # noqa: BLE001
                continue
            code = f.f_code
            for name, v in list(local.items()):
                spec = ("global", name, f.f_globals.get("__name__"), code.co_filename, 1, v) if module \
                    else ("local", name, code.co_name, code.co_filename, code.co_firstlineno, v)
                offer(v, spec, [], None)
        for mname, mod in _user_modules():
            for name, v in items_of(object_dict(mod) or {}):
                offer(v, ("global", name, mname, _file_of(mod), 1, v), [], None)
        for _ in range(DOWN_DEPTH):
            if len(found) == len(want):
                break
            nxt = []
            for obj, spec, segs, _direct in level:
                oid = id(obj)
                if oid in seen:
                    continue
                seen.add(oid)
                self.visits += 1
                if self.visits > DOWN_VISITS or (self.visits & 1023 == 0
                                                 and time.perf_counter() > self.deadline):
                    self.complete = False
                    return found
                tname = type(obj).__name__
                if isinstance(obj, dict):
                    for k, v in items_of(obj):
                        offer(v, spec, segs + [("key", k)], tname)
                elif isinstance(obj, (list, tuple, set, frozenset)):
                    # Long sequences of leaves (a list of 100,000 tensors) are
                    # tested at C speed; only their expandable items are visited.
                    items = values_of(obj)
                    item = segs + [("item", None)]
                    hits = want.intersection(map(id, items)).difference(found)
                    if hits:
                        for v in items:
                            if id(v) in hits and id(v) not in found:
                                found[id(v)] = self._root(spec, item, tname, v)
                    for cls in set(map(type, items)):
                        e = kinds.get(cls)
                        if e is None:
                            e = kinds[cls] = _expandable_type(cls, tensor)
                        if e:
                            for v in items:
                                if type(v) is cls and id(v) not in seen and id(v) not in want:
                                    nxt.append((v, spec, item, tname))
                else:
                    f = _class_file(obj)
                    d = object_dict(obj)
                    for k, v in items_of(d):
                        if k in _MODULE_DICTS and isinstance(v, dict):
                            for kk, vv in list(v.items()):
                                if isinstance(kk, str):
                                    offer(vv, ("attr", tname + "." + kk, None, f, 1, vv), [], tname)
                        elif isinstance(k, str):
                            offer(v, ("attr", tname + "." + k, None, f, 1, v), [], tname)
            level = nxt
        return found

    @staticmethod
    def _root(spec, segs, direct, obj):
        """The Root of ``obj``, reached from ``spec``'s named object by ``segs``."""
        kind, name, function, path, first, named = spec
        leaf = name.rsplit(".", 1)[-1]
        return Root(kind, name + _render(segs), direct or type(obj).__name__, function, path,
                    _write_line(path, first, 10 ** 9, leaf), named)


class Search:
    """Search finds the roots of many objects at once, within a deadline
    (``time.perf_counter``): downward from the named roots first
    (:class:`Down`), then, for what that did not reach, up the collector's
    referrers."""

    def __init__(self, deadline, internal_ids, tensor=None, ended_frames=()):
        self.deadline = deadline
        self.tensor = tensor
        # Frames that have ended but whose locals are still alive: those of
        # an uncaught exception's traceback, innermost first.
        self.ended = [f for f in ended_frames if not _skipped_frame(f)]
        self.internal = internal_ids  # ids of the census's own containers
        self.modules = _module_dicts()
        self.complete = True  # False once the deadline stopped the search
        self.walks = 0

    def roots(self, targets, walk=None):
        """Return ``{id(target): Root}`` for the targets whose root was found.
        ``walk``: ids of the targets worth a referrer walk where the
        downward search missed them (None: all).

        Each hop first looks at the locals of every thread's frames (a running
        frame's locals are invisible to ``gc.get_referrers`` on Python 3.11+),
        then walks the collector's objects once for what is still pending.
        """
        import gc
        frames = self._frames() + self.ended
        down = Down(self.deadline, frames, self.tensor)
        found = down.roots(targets)
        self.complete = down.complete
        self.visits = down.visits
        # pending: id(obj) -> (obj, ids of the targets it stands for, path segments)
        pending = {id(t): (t, [id(t)], [], None) for t in targets
                   if id(t) not in found and (walk is None or id(t) in walk)}
        for _ in range(HOPS):
            for f in frames:
                self._visit(f, pending, found, None)
            pending = {k: v for k, v in pending.items() if not all(i in found for i in v[1])}
            if not pending:
                break
            if time.perf_counter() > self.deadline:
                self.complete = False  # stopped by the budget
                break
            # A tuple: the call's arguments are this very tuple (CPython
            # passes an exact tuple through), left out below with the rest.
            objs = tuple([p[0] for p in list(pending.values())[:MAX_PENDING]])
            refs = gc.get_referrers(*objs)
            self.walks += 1
            nxt = {}
            # The walk's own records refer to the objects too: the entries
            # of pending hold them (a tensor only autograd keeps would
            # otherwise lead the walk through its own tuples, hop after hop).
            own = {id(refs), id(pending), id(nxt), id(objs), id(found), id(frames)}
            own.update(map(id, pending.values()))
            for r in refs:
                if id(r) in self.internal or id(r) in own or isinstance(r, types.FrameType):
                    continue
                self._visit(r, pending, found, nxt)
            del refs, objs
            pending = {k: v for k, v in nxt.items() if not all(i in found for i in v[1])}
        del frames
        return found

    @staticmethod
    def _frames():
        """Every thread's frames, innermost first, the hook's own left out."""
        out = []
        tops = list(sys._current_frames().values())
        top = f = None
        try:
            for top in tops:
                f = top
                while f is not None:
                    if not _skipped_frame(f):
                        out.append(f)
                    f = f.f_back
        finally:
            # This thread's top frame is this call's own: kept in a local it
            # makes a cycle that keeps the frames below it, and the values
            # they hold (the census's sample tensors), until the collector runs.
            tops = top = f = None
        return out

    @staticmethod
    def _add(nxt, r, p, segs):
        """Queue container ``r`` for the next hop, standing for ``p``'s targets."""
        prev = nxt.get(id(r))
        direct = p[3] or type(r).__name__  # what holds the tensors themselves
        nxt[id(r)] = (r, (prev[1] if prev else []) + p[1], segs if prev is None else prev[2],
                      direct if prev is None else prev[3])

    def _visit(self, r, pending, found, nxt):
        if isinstance(r, types.FrameType):
            if _skipped_frame(r):
                return
            for obj, origin, segs, direct in list(pending.values()):
                if all(i in found for i in origin):
                    continue
                root = _frame_root(r, obj, segs, direct)
                if root is not None:
                    for i in origin:
                        found.setdefault(i, root)
            return
        if type(r) is dict or isinstance(r, dict):
            mod = self.modules.get(id(r))
            for k, v in items_of(r):
                p = pending.get(id(v))
                if p is None or all(i in found for i in p[1]):
                    continue
                if mod is not None and isinstance(k, str):
                    root = Root("global", k + _render(p[2]), p[3] or type(v).__name__, mod[0], mod[1],
                                _write_line(mod[1], 1, 10 ** 9, k), v)
                    for i in p[1]:
                        found.setdefault(i, root)
                else:
                    self._add(nxt, r, p, [("key", k)] + p[2])
            return
        if isinstance(r, (list, tuple, set, frozenset)):
            for _, v in items_of(r):
                p = pending.get(id(v))
                if p is not None:
                    self._add(nxt, r, p, [("item", None)] + p[2])
            return
        if isinstance(r, (type, types.ModuleType, types.FunctionType, types.CellType)):
            return  # class attributes, closures: not followed
        d = object_dict(r)
        if d is None:
            return
        p = pending.get(id(d))
        hits = [(p[2][0][1], p) for _ in (0,)] if p is not None and p[2] and p[2][0][0] == "key" \
            else []
        if p is None:
            # 3.11+ may report the object itself rather than its __dict__
            hits = [(k, pending[id(v)]) for k, v in items_of(d) if id(v) in pending]
            hits = [(k, (q[0], q[1], [("key", k)] + q[2], q[3])) for k, q in hits]
        for k, q in hits:
            segs = q[2]
            if isinstance(k, str) and k in _MODULE_DICTS and len(segs) > 1 and segs[1][0] == "key":
                segs = [("key", segs[1][1])] + segs[2:]  # Model._buffers["x"] -> Model.x
            attr = segs[0][1] if segs and segs[0][0] == "key" else k
            path = _render(segs, owner_is_object=True)
            f = _class_file(r)
            held = d.get(attr, q[0]) if isinstance(attr, str) else q[0]
            root = Root("attr", type(r).__name__ + path, q[3] or type(held).__name__, None, f,
                        _write_line(f, 1, 10 ** 9, str(attr)), held)
            for i in q[1]:
                found.setdefault(i, root)
