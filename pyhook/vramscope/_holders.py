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

HOPS = 4  # referrer walks at most (tensor -> list -> dict -> owner)
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_MAX_SCAN_LINES = 2000
MAX_PENDING = 64  # objects per referrer walk (the walk compares each with every one)


def _skipped_frame(frame):
    """The hook's own frames (the census's locals are no holders)."""
    return frame.f_code.co_filename.startswith(_HERE)


def _module_dicts():
    """``{id(module.__dict__): module name}`` of the loaded modules."""
    out = {}
    for name, mod in list(sys.modules.items()):
        d = getattr(mod, "__dict__", None)
        if isinstance(d, dict):
            out[id(d)] = (name, getattr(mod, "__file__", None))
    return out


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
    mod = sys.modules.get(type(obj).__module__)
    return getattr(mod, "__file__", None)


# nn.Module keeps registered buffers and parameters in these dicts: the
# attribute is the key.
_MODULE_DICTS = ("_buffers", "_parameters", "_modules")


class Search:
    """Search finds the roots of many objects at once, within a deadline
    (``time.perf_counter``)."""

    def __init__(self, deadline, internal_ids):
        self.deadline = deadline
        self.internal = internal_ids  # ids of the census's own containers
        self.modules = _module_dicts()
        self.complete = True  # False once the deadline stopped the search
        self.walks = 0

    def roots(self, targets):
        """Return ``{id(target): Root}`` for the targets whose root was found.

        Each hop first looks at the locals of every thread's frames (a running
        frame's locals are invisible to ``gc.get_referrers`` on Python 3.11+),
        then walks the collector's objects once for what is still pending.
        """
        import gc
        found = {}
        # pending: id(obj) -> (obj, ids of the targets it stands for, path segments)
        pending = {id(t): (t, [id(t)], [], None) for t in targets}
        frames = self._frames()
        for _ in range(HOPS):
            for f in frames:
                self._visit(f, pending, found, None)
            pending = {k: v for k, v in pending.items() if not all(i in found for i in v[1])}
            if not pending:
                break
            if time.perf_counter() > self.deadline:
                self.complete = False  # stopped by the budget
                break
            objs = [p[0] for p in list(pending.values())[:MAX_PENDING]]
            refs = gc.get_referrers(*objs)
            self.walks += 1
            nxt = {}
            own = {id(refs), id(pending), id(nxt), id(objs), id(found), id(frames)}
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
        for top in list(sys._current_frames().values()):
            f = top
            while f is not None:
                if not _skipped_frame(f):
                    out.append(f)
                f = f.f_back
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
            for k, v in list(r.items()):
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
            for v in (r if not isinstance(r, (set, frozenset)) else list(r)):
                p = pending.get(id(v))
                if p is not None:
                    self._add(nxt, r, p, [("item", None)] + p[2])
            return
        if isinstance(r, (type, types.ModuleType, types.FunctionType, types.CellType)):
            return  # class attributes, closures: not followed
        d = getattr(r, "__dict__", None)
        if not isinstance(d, dict):
            return
        p = pending.get(id(d))
        hits = [(p[2][0][1], p) for _ in (0,)] if p is not None and p[2] and p[2][0][0] == "key" \
            else []
        if p is None:
            # 3.11+ may report the object itself rather than its __dict__
            hits = [(k, pending[id(v)]) for k, v in list(d.items()) if id(v) in pending]
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
