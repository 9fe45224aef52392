"""Auto-attach: watch() the model that trains, with no code change (docs/run.md).

``vramscope run`` puts a sitecustomize on the command's PYTHONPATH that
calls :func:`install` once torch is imported (launch/sitecustomize.py). It
then attaches with torch's global hooks (features detected, never versions):

* ``torch.nn.modules.module.register_module_forward_pre_hook``: the first
  module that runs a forward in training mode, with gradients enabled and
  parameters that require them, is the model. Its optimizer is the
  ``torch.optim.Optimizer`` that holds most of its parameters, found once
  among the live objects. ``vramscope.watch(model, optimizer)`` hooks both,
  and the global module hook is removed at once: it costs a call per module
  only until the first training forward.
* ``torch.optim.optimizer.register_optimizer_step_pre_hook`` (torch 2.x):
  an optimizer created after that first forward is picked up at its first
  ``step()``. Without this hook (torch 1.13) such a late optimizer is not
  seen, and one warning says to call ``vramscope.watch(model, optimizer)``.

* the global ``torch.autograd.backward`` wrapper (the watch's own,
  ``_backward.on_unclaimed``): once the model attached no longer trains (it
  was freed, or two backwards no watch took came with no step of its own
  between them: a k-fold loop's next fold), the module hook goes back on
  and the next model that trains is attached in its place
  (:func:`_on_unclaimed_backward`).

An explicit ``vramscope.watch()`` wins: the first one stands auto-attach down
for the whole process, and when auto-attach had already hooked a model, the
user's watch takes its place on the same connection (the monitor sees one
process, without a disconnect).

Like the rest of the hook, nothing here may break training: every hook body
is guarded, and a failure turns auto-attach off with one warning.
"""

import functools
import gc
import os
import sys
import threading
import warnings
import weakref

from . import _api, _backward, _compiled, _patch, _safe, _tracebacks

_lock = threading.RLock()
_state = None
_REAL_WATCH = _api.watch  # taken before install() replaces it
# Whether dynamo traces the call (_compiled.dynamo_check, set with torch): the
# global hooks stay out of compiled code, where a graph break would raise
# under fullgraph=True and, without it, left the call uncompiled.
_compiling = bool


# What an attached model, optimizer or handle reads as once it died
GONE = object()


class _Weak:
    """An attribute of _State held by a weak reference: auto-attach must
    not keep a model the user dropped alive, with its optimizer's state (a
    k-fold loop's first model, on the GPU for the rest of the process). Set
    to an object since freed, it reads as GONE: attached, and done.
    ``freed(state)``, where given, is called when the object set last is
    freed (not one set before it)."""

    def __init__(self, freed=None):
        self.freed = freed

    def __set_name__(self, owner, name):
        self.slot = "_weak_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        ref = obj.__dict__.get(self.slot)
        if ref is None:
            return None
        value = ref()
        return GONE if value is None else value

    def __set__(self, obj, value):
        callback = None if self.freed is None else \
            functools.partial(self._died, weakref.ref(obj))
        obj.__dict__[self.slot] = None if value is None or value is GONE \
            else weakref.ref(value, callback)

    def _died(self, state, ref):
        st = state()
        if st is not None and st.__dict__.get(self.slot) is ref:
            self.freed(st)


class _State:
    """What auto-attach holds in this process."""

    model = _Weak(freed=lambda st: _model_freed(st))
    optimizer = _Weak()
    handle = _Weak()
    retired = _Weak()

    def __init__(self):
        self.torch = None
        self.standing_down = False  # an explicit watch() took over
        self.model = None
        self.optimizer = None
        self.handle = None
        self.module_hook = None  # RemovableHandle of the global forward pre-hook
        self.register_module = None  # torch's register_module_forward_pre_hook
        # A model that stopped training (_on_unclaimed_backward): the module
        # hook is back on, and the next module that trains takes its place.
        self.retired = None
        self.rearmed = False  # the module hook is back on for a retired model
        self.unclaimed_at = None  # (step, micro) of the last backward no watch took
        self.keep_model = False  # the retired model trained on: never again
        self.names = set()  # the watch names auto-attach gave
        self.step_hook = None  # RemovableHandle of the global optimizer step pre-hook
        self.finder = None
        self.real_watch = _REAL_WATCH
        self.warned = False
        # Modules in eval mode looked at as the model (_trained_in_eval_mode)
        self.eval_seen = weakref.WeakSet()


def state():
    """Return auto-attach's state in this process, or None before install (for tests)."""
    return _state


def install():
    """Arm auto-attach in this process; idempotent, never raises.

    With ``VRAMSCOPE_DISABLE=1`` or ``VRAMSCOPE_AUTOATTACH=0`` it does nothing.
    """
    global _state
    if os.environ.get("VRAMSCOPE_AUTOATTACH", "1") == "0" or _api._disabled():
        return
    with _lock:
        if _state is not None:
            return
        _state = _State()
        _patch_watch()
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "nn"):
            _safe.call(_on_torch, torch)
        else:
            _state.finder = _TorchImported(_on_torch_imported)
            sys.meta_path.insert(0, _state.finder)


def _patch_watch():
    # vramscope.watch is looked up at call time, so replacing the attribute
    # sees every ``vramscope.watch(...)`` and every ``from vramscope import
    # watch`` made after this point. One made before (before torch was
    # imported) keeps the original: _attach sees its client instead.
    import vramscope

    vramscope.watch = _explicit_watch
    _api.watch = _explicit_watch


def _mid_step(handle):
    # Auto-attach hooks inside step 0, after any zero_grad it had. Its name
    # is one a later model's watch is named apart from (_name).
    watcher = getattr(handle, "watcher", None)
    if watcher is not None:
        watcher.started_mid_step()
        if _state is not None:
            _state.names.add(watcher.name)


def _explicit_watch(model, optimizer=None, **kwargs):
    """The user's watch(): auto-attach steps aside, then the real watch() runs."""
    st = _state
    if st is None:
        return _REAL_WATCH(model, optimizer, **kwargs)
    with _lock:
        first = not st.standing_down
        st.standing_down = True
        _remove_global_hooks(st)
        auto, st.handle = st.handle, None
    if not first or auto is None or auto is GONE:
        return st.real_watch(model, optimizer, **kwargs)
    # Watch first, then drop auto-attach's handle: the connection always
    # holds a handle, so the monitor sees no goodbye. The hook warns when a
    # second watch() replaces an earlier one on the same model; that
    # earlier one was ours, so that warning alone is not passed on.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            handle = st.real_watch(model, optimizer, **kwargs)
        finally:
            _safe.call(auto.remove)
    for w in caught:
        if "replac" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return handle


class _TorchImported:
    """A post-import hook: calls back once ``import torch`` has completed.

    A meta path finder (no importlib.abc: importing it costs more than this
    whole module). It takes itself off ``sys.meta_path``, asks the other
    finders for torch's spec and wraps the loader's ``exec_module``.
    """

    def __init__(self, callback):
        self._callback = callback

    def find_spec(self, name, path=None, target=None):  # noqa: D102 - importlib API
        if name != "torch":
            return None
        _safe.call(sys.meta_path.remove, self)
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module, callback = loader.exec_module, self._callback

        def exec_then_attach(module):
            try:
                exec_module(module)
            except BaseException as exc:
                _tracebacks.passed_through(exc)
                raise
            _safe.call(callback, module)

        loader.exec_module = exec_then_attach
        return spec


def _on_torch_imported(torch):
    with _lock:
        if _state is not None and _state.finder is not None:
            _state.finder = None
    _on_torch(torch)


def _on_torch(torch):
    """Register torch's global hooks, each where this torch has it."""
    st = _state
    with _lock:
        if st is None or st.standing_down or st.torch is not None:
            return
        st.torch = torch
        modmod = getattr(getattr(getattr(torch, "nn", None), "modules", None), "module", None)
        register_module = getattr(modmod, "register_module_forward_pre_hook", None)
        if not callable(register_module):
            _warn_once(st, "this torch has no global module hooks "
                           "(torch.nn.modules.module.register_module_forward_pre_hook); "
                           "auto-attach is off: call vramscope.watch(model, optimizer)")
            return
        global _compiling
        _compiling = _compiled.dynamo_check(torch)
        st.register_module = register_module
        st.module_hook = register_module(_on_module_call)
        _backward.on_unclaimed(_on_unclaimed_backward)
        # torch.optim deletes its ``optimizer`` attribute (1.13 and 2.x): the
        # module is found where the Optimizer class was defined.
        base = getattr(getattr(torch, "optim", None), "Optimizer", None)
        optmod = sys.modules.get(getattr(base, "__module__", None) or "torch.optim.optimizer")
        register_step = getattr(optmod, "register_optimizer_step_pre_hook", None)
        if callable(register_step):
            st.step_hook = register_step(_on_optimizer_step)


def _warn_once(st, text):
    if not st.warned:
        st.warned = True
        try:
            warnings.warn("vramscope: " + text, RuntimeWarning, stacklevel=3)
        except Exception:  # noqa: BLE001 - a warnings filter set to "error"
            pass


def _trains(torch, module):
    if not getattr(module, "training", False) or not torch.is_grad_enabled():
        return False
    try:
        return any(p.requires_grad for p in module.parameters())
    except Exception:  # noqa: BLE001 - an exotic module
        return False


def _on_module_call(module, args):
    """The global forward pre-hook: runs before every module's forward until
    attached; out of compiled code (a model only a compiled function calls
    is attached at its optimizer's first step: _on_optimizer_step)."""
    if _compiling():
        return None
    st = _state
    if st is None or st.model is not None or st.standing_down:
        return None
    try:
        return _attach(st, module, args, sys._getframe(1))
    except Exception as exc:  # noqa: BLE001 - never into the training loop
        _safe.report(exc)
        with _lock:
            _remove_global_hooks(st)
        return None


def _call_kwargs(frame):
    """The keyword inputs of the forward call that runs the global hook: the
    ``kwargs`` that torch's ``Module._call_impl`` (2.x: its ``inner``) holds.
    The global hook is given none, but a watcher's own pre-hook takes them
    (``with_kwargs=True``, torch 2.x). An empty dict when not found."""
    try:
        kwargs = frame.f_locals.get("kwargs")
    except Exception:  # noqa: BLE001 - an exotic frame
        return {}
    return kwargs if isinstance(kwargs, dict) else {}


def _trained_in_eval_mode(st, torch, module, args):
    """The optimizer that trains ``module``, a module in eval mode run with
    gradients enabled and parameters that require them: a model loaded in
    eval mode (transformers' ``from_pretrained``) that the loop never puts
    back in train mode, and the live optimizers it was found among
    (:func:`live_optimizers`). None and None otherwise (then torch 2.x's
    global optimizer hook attaches it at its first ``step()``; torch 1.13
    has none). Each such module is looked for once, with its children: one
    pass over the live objects. Not at a forward whose first input
    requires a gradient: an adversarial attack's or a saliency map's, which
    the model's training forward follows."""
    if getattr(module, "training", True) or not torch.is_grad_enabled() \
            or module in st.eval_seen:
        return None, None
    x = args[0] if args else None
    if isinstance(x, torch.Tensor) and x.requires_grad:
        return None, None
    try:
        if not any(p.requires_grad for p in module.parameters()):
            return None, None
        st.eval_seen.update(module.modules())
    except Exception:  # noqa: BLE001 - an exotic module
        return None, None
    found = live_optimizers(torch)
    return find_optimizer(torch, module, found), found


def _attach(st, module, args, caller=None):
    torch = st.torch
    optimizer = found = None
    if not _trains(torch, module):
        optimizer, found = _trained_in_eval_mode(st, torch, module, args)
        if optimizer is None:
            return None
    with _lock:
        if st.model is not None or st.standing_down:
            return None
        rearmed, retired = st.rearmed, st.retired
        if not rearmed and _api.current_client() is not None and _api._refs > 0:
            # The script watch()ed already, through a reference to watch
            # taken before auto-attach was installed: it is in charge.
            st.standing_down = True
            _remove_global_hooks(st)
            return None
        _remove_module_hook(st)
        st.rearmed, st.retired = False, None
        if module is retired:
            _keep(st, retired, None)
            return None
        if optimizer is None:
            found = live_optimizers(torch)  # one walk for both questions
            optimizer = find_optimizer(torch, module, found)
        called = module
        if optimizer is not None:
            # The module called may be a child of the model the optimizer
            # trains (a loop that calls model.encoder(x), a training_step
            # that calls self.net(x)): watch that model.
            module = find_owner(torch, module, optimizer)
        if module is retired:
            _keep(st, retired, optimizer)
            return None
        if optimizer is not None:
            partners = _safe.call(split_partners, torch, module, optimizer, found)
            if partners:
                names = [type(o).__name__ for o in [optimizer] + partners]
                _warn_once(st, "%s is trained by %d optimizers (%s); auto-attach watches %s "
                               "alone, so the others' updates are in no step phase and their "
                               "state is not in the anatomy; if they update it together each "
                               "step (Muon and AdamW), vramscope.watch(model, [...]) with all of "
                               "them watches the whole update"
                           % (type(module).__name__, len(names), ", ".join(names), names[0]))
        st.model = module
        st.optimizer = optimizer
        before = set(getattr(module, "_forward_pre_hooks", {}))
        old = st.handle
        if not rearmed:
            st.handle = st.real_watch(module, optimizer)
        else:
            # In place of the retired model's watch, on the same connection:
            # watch first, then remove it, so that the monitor sees one
            # process (as _explicit_watch does).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    st.handle = st.real_watch(module, optimizer, name=_name(st, module))
                finally:
                    if old is not None and old is not GONE:
                        _safe.call(old.remove)
        _mid_step(st.handle)
        if optimizer is None and st.step_hook is None:
            _warn_once(st, "auto-attach found no optimizer for %s when it first trained, and "
                           "this torch has no global optimizer hooks: the zero_grad and step "
                           "phases are not marked; call vramscope.watch(model, optimizer)"
                       % type(module).__name__)
        elif optimizer is not None:
            _remove_step_hook(st)
    if module is not called:
        return None  # the model is not the module called: its forward is not running
    # torch took the list of this call's pre-hooks before ours ran, so the
    # hooks watch() just registered on the model miss this first forward:
    # run them now, as torch would have (a hook may replace the inputs).
    # On torch 2.x that pre-hook takes the keyword inputs too: it is called
    # with those of this call (it returns None: watch() only looks).
    with_kwargs = getattr(module, "_forward_pre_hooks_with_kwargs", ())
    for key, hook in list(getattr(module, "_forward_pre_hooks", {}).items()):
        if key in before:
            continue
        if key in with_kwargs:
            hook(module, args, _call_kwargs(caller) if caller is not None else {})
            continue
        result = hook(module, args)
        if result is not None:
            args = result if isinstance(result, tuple) else (result,)
    return args


def _keep(st, retired, optimizer):
    """The retired model trains on (backwards of other models beside its
    own): it stays watched, and is never retired so again. (Lock held.)"""
    st.model, st.keep_model = retired, True
    if optimizer is not None:
        st.optimizer = optimizer


def _name(st, module):
    """The watch name of a model attached in place of a retired one: its
    class name, made unique among the live watches and those auto-attach
    gave before (a k-fold loop's folds: ``Net``, ``Net_2``, ``Net_3``)."""
    return _api._unique_name(None, module, _api.current_client(), st.names)


def _on_unclaimed_backward():
    """The global backward wrapper ran a backward that no watch took. When
    auto-attach's model no longer trains, the global module hook goes back
    on and the next module that trains is attached in its place (_attach):
    a k-fold loop's next fold, a search's next trial, a second stage with a
    new model. It no longer trains when it was freed, or when two such
    backwards came with no step or backward of its own between them (the
    first may be an auxiliary model's, trained beside it)."""
    st = _state
    if st is None or st.standing_down or st.module_hook is not None or st.keep_model:
        return
    model = st.model
    if model is None:
        return
    if model is not GONE:
        handle = st.handle
        client = getattr(handle, "client", None)
        if client is None or getattr(handle, "watcher", None) is None:
            return
        at = (client.step, client.micro)
        if st.unclaimed_at != at:
            st.unclaimed_at = at
            return
    _rearm(st, model)


def _model_freed(st):
    """The attached model was freed (the loop dropped it: a fold's end, a
    trial's), and its watch ended with it: the module hook goes back on at
    once, and the next module that trains is attached in its place."""
    if not st.standing_down:
        st.keep_model = False
        _safe.call(_rearm, st, GONE)


def _rearm(st, model):
    """Put the module hook back on in place of ``model`` (GONE: freed)."""
    with _lock:
        if st.standing_down or st.module_hook is not None or st.model is not model \
                or st.register_module is None:
            return
        st.unclaimed_at = None
        st.rearmed, st.retired = True, model
        st.model = None  # its optimizer stays: the step hook's late-optimizer path stays shut
        st.module_hook = st.register_module(_on_module_call)


def _on_optimizer_step(optimizer, args, kwargs):
    """The global optimizer step pre-hook (torch >= 2.0): a late optimizer
    joins; or, where no module trained outside compiled code before this
    first step (a compiled function runs the model), the model it trains is
    attached with it."""
    if _compiling():
        return None
    st = _state
    if st is None or st.standing_down or st.optimizer is not None or st.model is GONE:
        return None
    if st.model is None:
        _safe.call(_attach_at_step, st, optimizer)
        return None
    try:
        with _lock:
            if st.optimizer is not None or st.standing_down or not _shares_params(optimizer, st.model):
                return None
            st.optimizer = optimizer
            # This hook stays registered, inert from now on (one call that
            # returns at once per step): torch 2.x iterates its global hooks
            # live (chain(...values())), so removing one from inside it
            # raises into step() when another global hook follows.
            old = st.handle
            _watch_in_step(st, optimizer)
            if old is not None and old is not GONE:
                old.remove()
    except Exception as exc:  # noqa: BLE001
        _safe.report(exc)
    return None


def _watch_in_step(st, optimizer):
    """Watch ``st.model`` with ``optimizer`` from inside a step() (its
    global pre-hook): the new handle, its step 0 under way."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # our own re-watch of the same model, where one was
        st.handle = st.real_watch(st.model, optimizer)
    _mid_step(st.handle)


def _attach_at_step(st, optimizer):
    """The first step() of an optimizer before any module trained outside
    compiled code: the model is the module it trains (:func:`find_model`),
    watched from inside this step; its forwards run compiled, unseen."""
    with _lock:
        if st.model is not None or st.optimizer is not None or st.standing_down:
            return
        model = find_model(st.torch, optimizer)
        if model is None:
            return
        st.model, st.optimizer = model, optimizer
        _remove_module_hook(st)
        _watch_in_step(st, optimizer)
        watcher = getattr(st.handle, "watcher", None)
        if watcher is not None:
            watcher.forward_compiled = True


def find_model(torch, optimizer):
    """Return the module whose parameters include every one of
    ``optimizer``'s with the fewest others: the model it trains, not a
    container of it; of several with the same parameters (a wrapper and the
    model it holds), the innermost. None when no live module holds them
    all. One pass over the live objects (``gc.get_objects()``)."""
    base = getattr(getattr(torch, "nn", None), "Module", None)
    want = _patch.param_ids(optimizer)
    if base is None or not want:
        return None
    scored = []
    for o in gc.get_objects():
        if issubclass(type(o), base):  # type(): as live_optimizers
            have = {id(p) for p in o.parameters()}
            if want <= have:
                scored.append((len(have), o))
    if not scored:
        return None
    fewest = min(n for n, _ in scored)
    tied = [o for n, o in scored if n == fewest]
    inner = [o for o in tied if not any(c is t for t in tied
                                        for c in (getattr(o, "_modules", None) or {}).values())]
    return (inner or tied)[0]


def _shares_params(optimizer, model):
    return model is not GONE and _patch.trains(optimizer, model)


def live_optimizers(torch):
    """Return every live optimizer (wrappers included): one pass over the
    live objects (``gc.get_objects()``), which :func:`find_optimizer` and
    :func:`split_partners` share at an attach."""
    base = getattr(getattr(torch, "optim", None), "Optimizer", None)
    if base is None:
        return []
    # type(): no __class__ lookup (torch.distributed.reduce_op warns on any)
    return [o for o in gc.get_objects() if issubclass(type(o), base)]


def find_optimizer(torch, model, found=None):
    """Return the optimizer that holds most of ``model``'s parameters (by
    their bytes: a model split between two optimizers, Muon's matrices and
    AdamW's embeddings and norms, is watched with the one that holds the
    larger part, never by how many tensors each holds), or None.

    Wrappers that subclass ``Optimizer`` around another (accelerate's
    ``AcceleratedOptimizer``) share their inner optimizer's param groups;
    the inner one is chosen, as its ``step()`` runs exactly when a real
    step happens. An optimizer that holds another as a part of its own
    (SAM's base optimizer: ``_patch.held_optimizers``) is chosen over the
    one it holds: the watch hooks both. ``found``: the live optimizers
    (:func:`live_optimizers`; listed here when not given).
    """
    if found is None:
        found = live_optimizers(torch)
    mine = {id(p): p.numel() * p.element_size() for p in model.parameters()}
    scored = []
    for o in found:
        held = mine.keys() & _patch.param_ids(o)
        if held:
            n = sum(map(mine.__getitem__, held))
            wraps_another = any(getattr(o, "optimizer", None) is x for x in found)
            rank = 0 if wraps_another and _patch.unwrap_optimizer(o) is not o \
                else 2 if _patch.held_optimizers(o) else 1
            scored.append((n, rank, id(o), o))
    if not scored:
        return None
    return max(scored, key=lambda t: t[:3])[3]


def split_partners(torch, model, optimizer, found=None):
    """Return the other optimizers (unwrapped, one each) that train a part
    of ``model`` that ``optimizer`` does not: a model split between
    optimizers (Muon for the matrices, AdamW for the rest), of which
    auto-attach watches ``optimizer`` alone. Wrappers of ``optimizer`` and
    the optimizers it holds (SAM's base) are no partners, nor is one that
    shares a parameter with it (a learning-rate finder's). ``found``: the
    live optimizers (:func:`live_optimizers`; listed here when not given)."""
    if found is None:
        found = live_optimizers(torch)
    mine = {id(p) for p in model.parameters()}
    own = _patch.param_ids(optimizer)
    held = {id(o) for o in _patch.held_optimizers(optimizer)}
    partners = {}
    for o in found:
        inner = _patch.unwrap_optimizer(o)
        if inner is optimizer or id(inner) in held or id(inner) in partners:
            continue
        ids = _patch.param_ids(inner)
        if ids & mine and ids.isdisjoint(own):
            partners[id(inner)] = inner
    return list(partners.values())


def find_owner(torch, module, optimizer, depth=8):
    """Return ``module``, or the nearest of its ancestors whose parameters
    include every one of ``optimizer``'s: the model the optimizer trains,
    when the module called first is one of its children. ``module`` when
    the optimizer trains only it, or no ancestor holds all its parameters
    (separate models under one optimizer). Parents are found among the
    live modules (``gc.get_objects()``, once per process), by their
    ``_modules``."""
    want = _patch.param_ids(optimizer)
    if want <= {id(p) for p in module.parameters()}:
        return module
    base = getattr(getattr(torch, "nn", None), "Module", None)
    if base is None:
        return module
    mods = [o for o in gc.get_objects() if issubclass(type(o), base)]  # type(): as live_optimizers
    cur = module
    for _ in range(depth):
        parent = next((m for m in mods if any(c is cur for c in
                                               (getattr(m, "_modules", None) or {}).values())), None)
        if parent is None:
            return module
        if want <= {id(p) for p in parent.parameters()}:
            return parent
        cur = parent
    return module


def _remove_module_hook(st):
    h, st.module_hook = st.module_hook, None
    if h is not None:
        _safe.call(h.remove)


def _remove_step_hook(st):
    h, st.step_hook = st.step_hook, None
    if h is not None:
        _safe.call(h.remove)


def _remove_global_hooks(st):
    _remove_module_hook(st)
    _remove_step_hook(st)
    f, st.finder = st.finder, None
    if f is not None and f in sys.meta_path:
        _safe.call(sys.meta_path.remove, f)
