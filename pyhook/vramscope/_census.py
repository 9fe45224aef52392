"""Live tensor census of the watched device (docs/census.md, message ``census``).

At a step boundary, list the live tensors the collector tracks on the
watched device and split their storages (each counted once) into
parameters, gradients, optimizer state and other. Tensors of "other" are
grouped by a cheap signature (dtype, shape after the first dimension,
whether they carry an autograd graph); one or two of each of the largest
groups go to :mod:`_holders`, which names the root that keeps them alive.
Each root is then measured whole: the tensors under it (a few levels into
its containers), and the autograd graphs they keep: nodes, and the saved
tensors still in them (a node whose saved tensors backward has freed says
so, and counts none).

Everything runs within a time budget and says when it stopped short.
Nothing here raises into training (the caller guards it) or keeps a
reference past its return.
"""

import gc
import operator
import time
import weakref

from . import _anatomy, _holders, _messages, _modules

MAX_HOLDERS = 12  # roots a census names
MAX_MODULES = 12  # modules in the split of saved tensors
BELOW_NODES = 256  # nodes searched below one whose output no module with weights takes
SPREAD = 2  # tensors of a group sampled apart, besides its two largest
WALK_MIN = 1 << 20  # bytes a group needs for a referrer walk (besides WALK_SHARE)
WALK_SHARE = 0.05
MAX_GROUPS = 8  # "other" signatures whose roots are searched
GRAPH_NODES = 100000  # autograd nodes walked per census at most
DEPTH = 3  # levels into a root's containers when measuring it
# What torch says when a saved tensor was freed by backward (torch 1.13 to 2.x:
# torch/csrc/autograd/saved_variable.cpp, ERR_BACKWARD_TWICE).
_FREED = "already been freed"
DEFAULT_BUDGET = 0.5  # seconds: past it a census stops and says it is incomplete

# id(tensor) -> (weak reference to it, the step a census first saw it carry a
# graph). Kept beside the tensors, never on them: autograd nodes take no weak
# references, and a key in a node's ``metadata`` would show in the user's.
# Rebuilt by each census from the tensors still alive.
_first_seen = {}


def _on(device):
    """Whether a tensor is on ``device``: for CUDA and CPU an attribute read
    in C (``operator.attrgetter``), without a Python frame a tensor."""
    if device == "cuda":
        return operator.attrgetter("is_cuda")
    if device == "cpu":
        return operator.attrgetter("is_cpu")
    return lambda t: t.device.type == device


def _memory(t):
    """``(key, bytes)`` of the memory behind tensor ``t``: a view's is its
    base's (which the view keeps alive, and which is itself a live tensor),
    keyed by data pointer, so tensors sharing memory (``detach()``) count
    once. torch's ``nbytes`` where it has it (2.x; building a storage object
    costs ~3 us a tensor there), else elements times element size."""
    base = t._base
    if base is not None:
        t = base
    nbytes = getattr(t, "nbytes", None)
    if nbytes is None:
        nbytes = t.nelement() * t.element_size()
    return t.data_ptr(), nbytes


def live_tensors(torch):
    """Every tensor object the collector tracks (a list; drop it soon).

    Tested on each object's type, never with isinstance, which falls back
    to an object's ``__class__`` attribute and so runs user code (torch
    2.x's deprecated ``torch.distributed.reduce_op`` warns there)."""
    tensor = torch.Tensor
    objs = gc.get_objects()
    try:
        kinds = {cls for cls in set(map(type, objs)) if issubclass(cls, tensor)}
        return [o for o in objs if type(o) in kinds]
    finally:
        del objs


class _Graphs:
    """Walks autograd graphs once per census, each node once."""

    def __init__(self, torch, device_ok, known_keys, step, deadline, owners=None, listed=()):
        self.device_ok = device_ok
        self.owners = owners or {}  # id(parameter) -> the name of the module that has it
        self.by_module = {}  # module name (None: no module's weights) -> saved bytes
        self.counted = set()  # saved storages in by_module, once per census
        # Storages of the tensors the collector listed (the "other" group
        # holds those not in known_keys), and the bytes of by_module's
        # storages among them: the two figures' overlap.
        self.listed = listed
        self.also_other = 0
        self.known = known_keys  # storages of parameters etc.: not counted as saved
        self.step = step
        self.deadline = deadline
        self.seen = set()
        self.keep = []  # every node walked, so that no id is reused during the census
        self.saved_seen = set()
        self.attrs = {}  # node class -> its _saved_ attribute names
        self.first_seen = {}  # this census's _first_seen
        self.nodes = 0
        self.complete = True
        self.tensor = torch.Tensor

    def _saved_names(self, node):
        cls = type(node)
        names = self.attrs.get(cls)
        if names is None:
            names = self.attrs[cls] = tuple(a for a in dir(node) if a.startswith("_saved_"))
        return names

    def first_step(self, t):
        """The step a census first saw tensor ``t`` (which carries a graph)."""
        key = id(t)
        entry = self.first_seen.get(key) or _first_seen.get(key)
        if entry is None or entry[0]() is not t:
            try:
                entry = (weakref.ref(t), self.step)
            except TypeError:  # a tensor subclass without weak references
                return None
        self.first_seen[key] = entry
        return entry[1]

    def keep_first_seen(self):
        """Make this census's table the next one's, with the entries of
        tensors it did not reach (its budget ran out) that are still alive."""
        global _first_seen
        table = self.first_seen
        for key, entry in _first_seen.items():
            if key not in table and entry[0]() is not None:
                table[key] = entry
        _first_seen = table
        self.first_seen = {}

    def walk(self, roots):
        """Nodes, saved bytes still held, and how many of ``roots`` (grad_fn
        objects) backward has run through, each node and saved storage once
        per walk (a holder's figures do not depend on which holder was
        walked first). A root backward ran through had every node under it
        run too (that is how backward frees), so the saved tensors of its
        graph are not read: none is counted as held."""
        self.seen = set()
        self.saved_seen = set()
        nodes = saved = freed = 0
        owners = self.owners
        for root in roots:
            if id(root) in self.seen:
                continue
            self.seen.add(id(root))
            stack, check = [(root, None)], True
            while stack:
                if self.nodes >= GRAPH_NODES or time.perf_counter() > self.deadline:
                    self.complete = False
                    return nodes, saved, freed
                node, module = stack.pop()
                self.keep.append(node)
                nodes += 1
                self.nodes += 1
                following = getattr(node, "next_functions", ()) or ()
                if owners:
                    module = _owner(following, owners) or module
                if check:
                    held, gone = self._saved(node, module)
                    check = not gone  # backward ran through this graph
                    saved += held
                for nxt, _ in following:
                    if nxt is not None and id(nxt) not in self.seen:
                        self.seen.add(id(nxt))
                        stack.append((nxt, module))
            freed += not check
        return nodes, saved, freed

    def _saved(self, node, module):
        """(bytes of saved tensors ``node`` still holds, first counted here;
        whether backward freed them). Each storage also goes once per census
        to by_module: to ``module`` (the module with weights that takes the
        node's output), else to the nearest module with weights below it."""
        held = 0
        for name in self._saved_names(node):
            try:
                v = getattr(node, name)
            except RuntimeError as exc:
                if _FREED in str(exc):  # backward freed it
                    return 0, True
                continue  # e.g. a saved weight the optimizer has since updated in place
            except Exception:  # noqa: BLE001 - an attribute torch cannot give
                continue
            for t in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(t, self.tensor) and self.device_ok(t):
                    key, size = _memory(t)
                    if key and key not in self.known and key not in self.saved_seen:
                        self.saved_seen.add(key)
                        held += size
                        if key not in self.counted:
                            self.counted.add(key)
                            if key in self.listed:
                                self.also_other += size
                            if module is None:
                                module = self._below(node)
                            self.by_module[module] = self.by_module.get(module, 0) + size
        return held, False

    def _below(self, node):
        """The module with weights nearest below ``node`` (towards the
        inputs: what made its input), None within BELOW_NODES nodes."""
        if not self.owners:
            return None
        queue, seen = [node], {id(node)}
        for cur in queue:
            if len(queue) > BELOW_NODES:
                return None
            following = getattr(cur, "next_functions", ()) or ()
            name = _owner(following, self.owners)
            if name is not None:
                return name
            for nxt, _ in following:
                if nxt is not None and id(nxt) not in seen:
                    seen.add(id(nxt))
                    queue.append(nxt)
        return None

    def saved_by_module(self):
        """The by-module split of the saved tensors this census counted,
        largest first, MAX_MODULES of them and the rest summed; also_other
        is the bytes of those storages that the "other" group counts too
        (a saved tensor the collector lists, such as a layer's output that
        the next layer saved)."""
        ranked = sorted(self.by_module.items(), key=lambda kv: (-kv[1], kv[0] or ""))
        return {"modules": [{"module": _messages.clip(m, 256) if m is not None else None, "bytes": b}
                            for m, b in ranked[:MAX_MODULES]],
                "rest": {"modules": len(ranked[MAX_MODULES:]), "bytes": sum(b for _, b in ranked[MAX_MODULES:])},
                "also_other": self.also_other}


# Nodes between a node and its parameters' AccumulateGrad that only view the
# parameter (Linear's weight reaches addmm through a transposition).
_VIEWS = ("TBackward", "TransposeBackward", "PermuteBackward", "ViewBackward", "ReshapeAliasBackward",
          "ExpandBackward", "UnsqueezeBackward", "SqueezeBackward", "ToCopyBackward")


def _owner(following, owners):
    """The module whose parameter a node reads (directly, or through a view
    of it), from its ``next_functions``; None when it reads none."""
    for nxt, _ in following:
        if nxt is None:
            continue
        var = getattr(nxt, "variable", None)  # AccumulateGrad: the leaf it accumulates into
        if var is None and type(nxt).__name__.startswith(_VIEWS):
            inner = getattr(nxt, "next_functions", ()) or ()
            if len(inner) == 1 and inner[0][0] is not None:
                var = getattr(inner[0][0], "variable", None)
        if var is not None:
            name = owners.get(id(var))
            if name is not None:
                return name
    return None


def _known(torch, model, optimizer):
    """Storage keys of parameters (and buffers), gradients and optimizer state."""
    params, buffers = [], []
    if model is not None:
        listed = _anatomy.module_tensors(model) if _anatomy.plain_tree(torch, model) else None
        params, buffers = listed if listed is not None else \
            (list(model.parameters()), list(model.buffers()))
    weights = {_memory(t)[0] for t in params + buffers}
    grads = {_memory(p.grad)[0] for p in params if p.grad is not None}
    state = _anatomy.optimizer_state(optimizer)
    opt = set()
    if state is not None:
        opt = {_memory(t)[0]
               for t in _anatomy.state_tensors(state, torch.Tensor, torch.is_tensor)}
    return weights, grads, opt


def _contents(obj, tensor, depth=0, out=None):
    """Tensors under ``obj``: itself, or in its containers to DEPTH levels
    (an object's attributes on the first level only)."""
    if out is None:
        out = []
    if isinstance(obj, tensor):
        out.append(obj)
    elif depth < DEPTH:
        values = _holders.values_of(obj)
        if not values and depth == 0:
            values = _holders.values_of(_holders.object_dict(obj) or {})
        for v in values:
            if isinstance(v, tensor):
                out.append(v)  # the common leaf, without a call
            else:
                _contents(v, tensor, depth + 1, out)
    return out


def take(torch, device, model=None, optimizer=None, step=0, reason="request",
         budget=DEFAULT_BUDGET, request=None, ended_frames=()):
    """Return a ``census`` message of the live tensors on ``device``.
    ``optimizer``: one, or a tuple of them (_anatomy.optimizer_state).
    ``ended_frames``: frames off the stack whose locals are holders too (an
    uncaught exception's, innermost first)."""
    t0 = time.perf_counter()
    deadline = t0 + budget
    device_ok = _on(device)
    weights, grads, opt = _known(torch, model, optimizer)
    kind_of = dict.fromkeys(opt, "optimizer")
    kind_of.update(dict.fromkeys(grads, "gradients"))
    kind_of.update(dict.fromkeys(weights, "parameters"))
    parameter = getattr(getattr(torch, "nn", None), "Parameter", None)
    tensors = live_tensors(torch)
    groups = {k: [0, 0] for k in ("parameters", "gradients", "optimizer")}
    seen = set()
    seen_add = seen.add
    other = {}  # signature -> [bytes, tensors, [sample tensors], [their sizes], smaller of the top 2]
    other_bytes = other_count = 0
    sized = hasattr(torch.Tensor, "nbytes")
    esize = {}  # dtype -> element size, where torch has no nbytes
    loose_params = model is None and parameter is not None
    for t in tensors:
        try:
            if not device_ok(t):
                continue
            # _memory(t), inlined: this loop runs once per live tensor
            base = t._base
            m = t if base is None else base
            key = m.data_ptr()
            dtype = t.dtype
            if sized:
                size = m.nbytes
            else:
                dt = dtype if m is t else m.dtype
                es = esize.get(dt)
                if es is None:
                    es = esize[dt] = m.element_size()
                size = m.nelement() * es
            fn = t.grad_fn
        except Exception:  # noqa: BLE001 - a tensor subclass without memory of its own
            continue
        g = kind_of.get(key)
        if g is None and loose_params and isinstance(t, parameter):
            g = "parameters"
        if g is not None:
            if key and key not in seen:
                seen_add(key)
            else:
                size = 0
            groups[g][0] += size
            groups[g][1] += 1
            continue
        if key and key not in seen:
            seen_add(key)
        else:
            size = 0
        other_bytes += size
        other_count += 1
        sig = (dtype, t.dim()) if fn is None else (dtype, t.dim(), type(fn))
        e = other.get(sig)
        if e is None:
            e = other[sig] = [0, 0, [], [], -1]
        e[0] += size
        n = e[1] = e[1] + 1
        # The group's two largest storages stand for it in the search (e[4]
        # the smaller of the two), and SPREAD of its tensors taken ever
        # further apart (the 4th, 8th, 16th... seen): a holder of many of
        # them likely holds those.
        s, sizes = e[2], e[3]
        if len(s) < 2:
            s.append(t)
            sizes.append(size)
            e[4] = min(sizes)
        elif size > e[4]:
            k = 0 if sizes[0] <= sizes[1] else 1
            s[k], sizes[k] = t, size
            e[4] = min(sizes[0], sizes[1])
        elif n >= 4 and n & (n - 1) == 0:
            if len(s) < 2 + SPREAD:
                s.append(t)
                sizes.append(size)
            else:
                k = 2 + n.bit_length() % SPREAD
                s[k], sizes[k] = t, size
    groups["other"] = [other_bytes, other_count]
    count = sum(v[1] for v in groups.values())
    del tensors
    listed = time.perf_counter()
    known = set(kind_of)

    # The largest groups, and every group that carries graphs, go to the search.
    ranked = sorted(other.values(), key=lambda e: -e[0])
    ranked.sort(key=lambda e: e[2][0].grad_fn is None)  # graphs first, then by bytes
    targets = [t for e in ranked[:MAX_GROUPS] for t in e[2]]
    searched_groups = [(e[0], e[1], [id(t) for t in e[2]]) for e in ranked[:MAX_GROUPS]]
    # Where the downward search misses, the referrer walk (a pass over every
    # object the collector tracks, per hop) is spent only on groups that
    # matter: ones that keep graphs, or hold WALK_SHARE of the other bytes.
    floor = max(WALK_MIN, WALK_SHARE * groups["other"][0])
    walk = {id(t) for e in ranked[:MAX_GROUPS] if e[0] >= floor or e[2][0].grad_fn is not None
            for t in e[2]}
    for e in ranked:
        e[2].clear()
    other.clear()
    search = _holders.Search(deadline, {id(targets), id(ranked)}, torch.Tensor, ended_frames)
    try:
        roots = search.roots(targets, walk) if targets else {}
    finally:
        _holders.release_locals()
    del ranked
    # Groups none of whose samples reached a named root (a tensor only a
    # C extension, a closure or a class attribute holds): said, not guessed.
    lost = [g for g in searched_groups if not any(i in roots for i in g[2])]
    searched = time.perf_counter()

    graphs = _Graphs(torch, device_ok, known, step, deadline,
                     _modules.param_owners(model) if model is not None else None, seen)
    holders, done = [], set()
    for t in targets:
        root = roots.get(id(t))
        if root is None or root.key() in done:
            continue
        done.add(root.key())
        holders.append(_measure(torch, root, graphs, device_ok, known))
    del targets
    roots.clear()
    graphs.keep.clear()
    graphs.keep_first_seen()
    holders.sort(key=lambda h: (-(h["bytes"] + h["graph_saved"]), -h["graph_nodes"], h["name"]))
    rest = holders[MAX_HOLDERS:]
    holders = holders[:MAX_HOLDERS]
    end = time.perf_counter()
    return {
        "v": _messages.PROTOCOL, "type": "census", "seq": None, "t": time.monotonic(),
        "step": max(int(step), 0),
        "census": {
            "reason": reason, "request": request,
            "device": _messages.clip(device, 32),
            "tensors": count,
            "groups": {k: {"bytes": v[0], "tensors": v[1]} for k, v in groups.items()},
            "holders": holders,
            "rest": {"holders": len(rest), "bytes": sum(h["bytes"] for h in rest)},
            "unattributed": {"groups": len(lost), "tensors": sum(g[1] for g in lost),
                             "bytes": sum(g[0] for g in lost)},
            "saved_by_module": graphs.saved_by_module(),
            "complete": search.complete and graphs.complete,
            "cost_ms": {"list": _ms(listed - t0), "holders": _ms(searched - listed),
                        "graphs": _ms(end - searched), "total": _ms(end - t0)},
        },
    }


def _ms(s):
    return round(s * 1000.0, 3)


def _measure(torch, root, graphs, device_ok, known):
    """One holder entry: what is under ``root`` on the device, and its graphs."""
    tensors = _contents(root.obj, torch.Tensor)
    seen, nbytes, count, grad_fns, steps = set(), 0, 0, [], []
    dtypes = {}
    sized = hasattr(torch.Tensor, "nbytes")
    for t in tensors:
        try:
            if not device_ok(t):
                continue
            base = t._base  # _memory(t), inlined: a holder may hold 100,000
            m = t if base is None else base
            key = m.data_ptr()
            size = m.nbytes if sized else m.nelement() * m.element_size()
            fn = t.grad_fn
        except Exception:  # noqa: BLE001
            continue
        count += 1
        if count <= 1000:  # the commonest dtype, from the first thousand
            dtypes[t.dtype] = dtypes.get(t.dtype, 0) + 1
        if key and key not in seen and key not in known:
            seen.add(key)
            nbytes += size
        if fn is not None:
            grad_fns.append(fn)
            st = graphs.first_step(t)
            if st is not None:
                steps.append(st)
    nodes, saved, freed = graphs.walk(grad_fns)
    root.obj = None
    return {
        "kind": root.kind,
        "name": _messages.clip(root.name, 256),
        "container": _messages.clip(root.container or "", 64),
        "function": _messages.clip(root.function, 256) if root.function else None,
        "file": _messages.clip(root.file, 1024) if root.file else None,
        "line": root.line if isinstance(root.line, int) and root.line > 0 else None,
        "tensors": count,
        "bytes": nbytes,
        "dtype": str(max(dtypes, key=dtypes.get)).replace("torch.", "")[:32] if dtypes else None,
        "graphs": len({id(f) for f in grad_fns}),
        "graph_nodes": nodes,
        "graph_saved": saved,
        "graph_freed": freed,
        "first_step": min(steps) if steps else None,
        "last_step": max(steps) if steps else None,
    }
