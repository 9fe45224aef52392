"""Instance patches and optimizer discovery for the Watcher (docs/hook.md).

Everything here looks at the *instance*, never the class or torch's version:
accelerate's ``AcceleratedOptimizer`` is an ``Optimizer`` subclass whose
``Optimizer.__init__`` never ran, so the class has ``register_step_pre_hook``
while the instance lacks the ``_optimizer_step_pre_hooks`` dict it writes to
(the H100 recordings' callorders/accelerate.txt).
"""

import functools
import inspect
import itertools
import types
import weakref

from . import _safe, _tracebacks

# Attributes under which known wrappers keep the real optimizer:
# accelerate's AcceleratedOptimizer (``.optimizer``, accelerate/optimizer.py)
# and Lightning's LightningOptimizer (``._optimizer``, lightning/pytorch/core/optimizer.py).
INNER = ("optimizer", "_optimizer")
KNOWN = ("AcceleratedOptimizer", "LightningOptimizer")
MAX_UNWRAP = 4


def is_optimizer_like(obj):
    """Report whether ``obj`` looks like an optimizer: ``step``, ``zero_grad``, ``param_groups``."""
    return (callable(_instance_attr(obj, "step")) and callable(_instance_attr(obj, "zero_grad"))
            and isinstance(_instance_attr(obj, "param_groups"), list))


def _instance_attr(obj, name):
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a property that raises is "absent"
        return None


def initialised(opt):
    """Report whether ``Optimizer.__init__`` ran on this instance (its hook dicts exist)."""
    d = getattr(opt, "__dict__", {})
    return isinstance(d.get("_optimizer_step_pre_hooks"), dict) \
        and isinstance(d.get("_optimizer_step_post_hooks"), dict)


def unwrap_optimizer(opt):
    """Return the optimizer that really runs the update under known wrappers.

    Follows ``.optimizer`` / ``._optimizer`` while the object is a wrapper:
    a known wrapper class, or an object whose ``Optimizer.__init__`` never
    ran. Returns ``opt`` itself when there is nothing to unwrap.
    """
    seen = set()
    for _ in range(MAX_UNWRAP):
        if id(opt) in seen:
            break
        seen.add(id(opt))
        inner = None
        for name in INNER:
            cand = _instance_attr(opt, name)
            if cand is not None and cand is not opt and is_optimizer_like(cand):
                inner = cand
                break
        if inner is None:
            break
        # LightningOptimizer takes the class "Lightning" + the optimizer's class
        # name (a subclass of both), so known wrappers are found in the MRO.
        known = any(c.__name__ in KNOWN for c in type(opt).__mro__)
        if initialised(opt) and not known:
            break  # a real Optimizer that merely holds another one
        opt = inner
    return opt


def held_optimizers(opt):
    """The optimizers ``opt`` holds in its own attributes that share
    parameters with it, at most MAX_UNWRAP: they may run its update.
    SAM's ``base_optimizer`` does (davda54/sam: ``first_step()`` and
    ``second_step()``, which calls ``base_optimizer.step()``; SAM's own
    ``step()`` runs only with a closure), and keeps state of its own."""
    out = []
    try:
        own = param_ids(opt)
        for v in list(getattr(opt, "__dict__", {}).values()):
            if v is not opt and is_optimizer_like(v) and not own.isdisjoint(param_ids(v)):
                out.append(v)
    except Exception:  # noqa: BLE001 - an object that cannot be read so holds none
        return []
    return out[:MAX_UNWRAP]


def param_ids(opt):
    """The ids of the parameters in ``opt``'s param groups."""
    return {id(p) for g in (getattr(opt, "param_groups", None) or ()) if isinstance(g, dict)
            for p in (g.get("params") or ())}


def trains(opt, model):
    """Whether ``opt`` holds any of ``model``'s parameters."""
    ids = param_ids(opt)
    return any(id(p) in ids for p in model.parameters())


def has_step_hooks(optimizer):
    """Report whether this *instance* can take step pre/post hooks.

    ``register_step_pre_hook`` writes into the instance's
    ``_optimizer_step_pre_hooks``, created by ``Optimizer.__init__`` (torch >= 2.0);
    a class that has the method says nothing about an instance whose
    ``__init__`` was skipped.
    """
    return (callable(getattr(optimizer, "register_step_pre_hook", None))
            and callable(getattr(optimizer, "register_step_post_hook", None))
            and initialised(optimizer))


def find_closure(args, kwargs):
    """Return ``(where, closure)`` of an ``optimizer.step`` call: where is
    ``"kw"`` or the positional index, or ``(None, None)``."""
    c = kwargs.get("closure")
    if c is not None:
        return "kw", c
    for i, a in enumerate(args):
        # torch's step hooks get ``self`` as args[0]; an optimizer is not callable.
        if callable(a) and not hasattr(a, "param_groups"):
            return i, a
    return None, None


def replace_closure(args, kwargs, where, closure):
    """Return ``(args, kwargs)`` with the closure at ``where`` replaced."""
    if where == "kw":
        kwargs = dict(kwargs)
        kwargs["closure"] = closure
        return args, kwargs
    args = list(args)
    args[where] = closure
    return tuple(args), kwargs


def weak(obj, callback=None):
    """A reference to ``obj`` that does not keep it alive, called to get it
    (None once freed): ``weakref.ref`` (``callback`` called with it when
    ``obj`` is freed), or for an object that takes no weak reference a
    callable that returns it (held)."""
    try:
        return weakref.ref(obj, callback)
    except TypeError:
        return itertools.repeat(obj).__next__


class _BoundWeakly(functools.partial):
    """What :func:`patch_method` sets on an instance: called as
    ``obj.name(...)``, it runs the wrapper on ``obj`` without holding
    ``obj``. A bound method would (``obj``, its ``__dict__``, the method,
    ``obj`` again: a cycle that only the cyclic collector frees, so a
    patched model or optimizer the loop dropped, on the GPU its weights and
    state, outlived the loop's last reference). Calling it is C's
    (``functools.partial``): no frame more than a bound method's.

    It passes for the method bound to ``obj`` where others look:
    ``__self__`` and ``__func__`` (torch's LR schedulers wrap
    ``optimizer.step`` through them), ``copy.deepcopy`` of ``obj`` (an EMA
    copy runs its class's method, unobserved) and pickling
    (``torch.save(model)``: the class's method, as for any bound method)."""

    @property
    def __self__(self):
        return self.__dict__["_ref"]()

    def __deepcopy__(self, memo):
        copy = memo.get(id(self.__self__))
        return self if copy is None else self.__dict__["_copied"](copy)

    def __reduce__(self):
        return getattr, (self.__self__, self.__dict__["_name"])


class Patched:
    """A method :func:`patch_method` patched, as its ``entry`` is given it:
    ``func``, called with the instance first, and ``ref``, the instance
    held weakly (a bound method kept would hold it); the entry calls
    ``func(ref(), ...)``. For a callable that was no method of the instance
    (set on it before), ``func`` calls that without the instance. ``on`` is
    False once undone."""

    __slots__ = ("func", "ref", "on")

    def __init__(self, func, ref):
        self.func, self.ref, self.on = func, ref, True

    @classmethod
    def calling(cls, call):
        """``call``, any callable, as a Patched that calls it (held)."""
        return cls(lambda _obj, *args, **kwargs: call(*args, **kwargs), _none)

    def call(self, args, kwargs):
        """Call the method as patched (an entry's cold paths)."""
        return self.func(self.ref(), *args, **kwargs)


def _none():
    return None


def patch_method(obj, name, before, after, wrap_args=None, kwargs_only=False, around=None,
                 plain_set=False, entry=None):
    """Wrap ``obj.name`` so ``before``/``after`` (each may be None) run around it;
    return an undo.

    ``around(original, args, kwargs)``, when given, runs instead of all that
    and makes the call itself (one frame of the caller's instead of two);
    it must not raise errors of its own.

    ``entry(patched, *args, **kwargs)``, when given, is what ``obj.name(...)``
    calls, with no frame of this module's between (zero_grad's begin and
    end, every step): ``patched`` is the :class:`Patched` method. It makes
    the call itself, runs only that once ``patched.on`` is False, raises no
    errors of its own, and keeps itself out of the tracebacks of the
    call's (``_tracebacks.passed_through``).

    ``wrap_args(args, kwargs)``, when given, returns the arguments to call the
    original with (the step patch wraps a closure with it); with ``kwargs_only``
    it is called only when there are keyword arguments (the forward's peek at
    keyword inputs on torch 1.13: a frame less at every plain forward).

    What is set is a :class:`_BoundWeakly`, which holds ``obj`` weakly, as
    does everything here: patched, ``obj`` is freed when its last other
    reference goes. With ``plain_set`` it is set (and undone)
    as a plain instance attribute, past a ``__setattr__`` of ``obj``'s class
    (Fabric's ``_FabricModule`` passes attributes on to the module it
    wraps), as ``torch.nn.Module.__setattr__`` sets a method. Undo restores
    the original when the attribute is still ours; when someone wrapped on
    top of us (a scheduler), it leaves our wrapper in place but inert, so
    their wrapper keeps working.
    """
    had_own = name in getattr(obj, "__dict__", {})
    original = getattr(obj, name)
    ref = weak(obj)
    # The function behind a method bound to obj, called on obj (bound anew
    # at each call: a bound method kept here would hold obj) and on a copy
    # of obj: copy.deepcopy rebinds the wrapper to the copy (an EMA model),
    # which must run its own method, unobserved.
    func = getattr(original, "__func__", None) \
        if getattr(original, "__self__", None) is obj else None
    if func is not None:
        original = None
    bind = types.MethodType
    patched = Patched(func, ref) if func is not None else Patched.calling(original)

    report = _safe.report
    passed_through = _tracebacks.passed_through

    # Each call of the original is inside a try whose handler takes this
    # wrapper's frames out of the traceback of what it raises (_tracebacks).
    def method_around(*args, **kwargs):
        try:
            call = original or bind(func, ref())
            if patched.on:
                return around(call, args, kwargs)
            return call(*args, **kwargs)
        except BaseException as exc:
            passed_through(exc)
            raise

    def method(*args, **kwargs):
        call = original or bind(func, ref())
        # _safe.call inlined: this runs on the training thread every step.
        if patched.on:
            try:
                if before is not None:
                    before()
                if wrap_args is not None and (kwargs or not kwargs_only):
                    args, kwargs = wrap_args(args, kwargs)
            except Exception as exc:  # noqa: BLE001
                report(exc)
        if after is None:
            try:
                return call(*args, **kwargs)
            except BaseException as exc:
                passed_through(exc)
                raise
        try:
            return call(*args, **kwargs)
        except BaseException as exc:
            passed_through(exc)
            raise
        finally:
            if patched.on:
                try:
                    after()
                except Exception as exc:  # noqa: BLE001
                    report(exc)

    if around is not None:
        method = method_around
    elif entry is not None:
        method = functools.partial(entry, patched)

    def unbound(_self, *args, **kwargs):
        # The wrapper as a function of its instance (what a scheduler binds
        # to the optimizer): the wrapper on obj, else the method itself.
        try:
            if _self is ref():
                return method(*args, **kwargs)
            if func is not None:
                return func(_self, *args, **kwargs)
            return original(*args, **kwargs)
        except BaseException as exc:
            passed_through(exc)
            raise

    bound = _BoundWeakly(entry, patched) if entry is not None else _BoundWeakly(method)
    for f in (bound, unbound):
        f.__name__ = getattr(func or original, "__name__", name)
        f.__doc__ = getattr(func or original, "__doc__", None)
        f._vramscope_wrapper = True
    # What a decorator's __wrapped__ gives (Lightning reads training_step's
    # arguments there); it is the class's function (a bound method would
    # hold obj), so inspect.signature(model.forward) is told the method's
    # own signature by __signature__ (which inspect reads before it).
    bound.__wrapped__ = unbound.__wrapped__ = func or original
    try:
        bound.__signature__ = inspect.signature(getattr(obj, name))
    except Exception:  # noqa: BLE001 - a callable with none: inspect says so later
        pass
    bound.__dict__.update(_ref=ref, _name=name, __func__=unbound,
                          _copied=lambda copy: bind(func, copy) if func is not None else original)
    # Keep the markers LR schedulers put on the step they wrapped, so a
    # scheduler made before watch() still sees its counter in place.
    for marker in ("_with_counter", "_wrapped_by_lr_sched"):
        if getattr(func or original, marker, False):
            setattr(bound, marker, True)
            setattr(unbound, marker, True)
    put, drop = (object.__setattr__, object.__delattr__) if plain_set else (setattr, delattr)
    put(obj, name, bound)

    def undo():
        patched.on = False
        target = ref()
        if target is not None and target.__dict__.get(name) is bound:
            if had_own:
                put(target, name, original or bind(func, target))
            else:
                drop(target, name)

    return undo


def keep_out_of_replicas(module):
    """Make the replicas ``DataParallel`` builds of ``module`` go without the
    hook's instance wrappers; return an undo, or None where ``module`` makes
    no replicas.

    ``Module._replicate_for_data_parallel`` builds a replica from a copy of
    the module's ``__dict__``, so a wrapper the hook set there (a bound
    method of ``module``: torch 1.13's forward peek at keyword inputs) would
    make each replica run ``module``'s own method, with ``module``'s
    parameters, on the replica's device. A replica whose dict has none runs
    its class's methods as itself; the forward hooks, which a replica
    shares, are called with the replica and leave it alone."""
    if not callable(getattr(module, "_replicate_for_data_parallel", None)):
        return None

    def replicate_without_wrappers(original, args, kwargs):
        replica = original(*args, **kwargs)
        try:
            own = replica.__dict__
            for name in [n for n, v in own.items()
                         if getattr(getattr(v, "__func__", None), "_vramscope_wrapper", False)]:
                del own[name]
        except Exception as exc:  # noqa: BLE001 - the replica goes back whatever happens
            _safe.report(exc)
        return replica

    return patch_method(module, "_replicate_for_data_parallel", None, None,
                        around=replicate_without_wrappers, plain_set=True)


def around_compiled_call(module, pre, post):
    """Run ``pre(module, args, kwargs)`` and ``post(module, args, output)``
    around a ``Module.compile()``d module's compiled call, outside the
    compiled code, and return an undo; None when ``module`` was not compiled
    in place.

    ``Module.compile()`` compiles the module's ``_call_impl``, forward hooks
    included: dynamo traces a hook there, breaks the graph at its lock, and
    with ``fullgraph=True`` raises into training (torch 2.15). The
    compiled call is the instance's ``_compiled_call_impl``, which
    ``Module.__call__`` runs; wrapped, the hooks run before and after it."""
    compiled = getattr(module, "__dict__", {}).get("_compiled_call_impl")
    if compiled is None:
        return None
    ref = weak(module)  # held weakly: the undo is the watch's, which holds the module so

    def compiled_call_watched(*args, **kwargs):
        module = ref()
        pre(module, args, kwargs)
        output = compiled(*args, **kwargs)
        post(module, args, output)
        return output

    compiled_call_watched._vramscope_watched = True
    module._compiled_call_impl = compiled_call_watched

    def undo():
        module = ref()
        if module is not None and module.__dict__.get("_compiled_call_impl") is compiled_call_watched:
            module._compiled_call_impl = compiled

    return undo


def is_watched_call(call):
    """Whether ``call`` is a compiled call that :func:`around_compiled_call`
    wrapped."""
    return getattr(call, "_vramscope_watched", False)


# The methods a wrapper calls its module from: DDP's forward calls
# _run_ddp_forward, which calls the module; DataParallel's forward calls it.
_WRAPPER_CALLS = frozenset(("forward", "_run_ddp_forward"))


def calling_wrappers(frame, model, module_type, depth=16):
    """The modules that wrap ``model`` and called it, innermost first, found
    among the ``depth`` callers from ``frame`` (a forward hook's caller)
    that wrap it (:func:`wraps`). Such a
    wrapper's ``zero_grad()`` is the class's, run on the wrapper, over the
    same parameters: a patch on ``model`` never sees it (transformers'
    ``Trainer`` calls ``model.zero_grad()`` on the wrapped model).

    Only the locals of a method named as a wrapper's call of its module
    (_WRAPPER_CALLS) are read: on Python before 3.13, ``f_locals`` keeps a
    copy of the frame's locals in the frame until it ends, and a copy in
    the training loop's own frame would keep what the loop deletes (a
    model, a batch) alive for as long as the loop runs."""
    inner = [model]  # the model, then the wrappers found, innermost first
    while frame is not None and depth > 0:
        code = frame.f_code
        obj = frame.f_locals.get("self") if code.co_name in _WRAPPER_CALLS \
            and code.co_argcount and code.co_varnames[0] == "self" else None
        if obj is not None and isinstance(obj, module_type) \
                and not any(obj is m for m in inner) and wraps(obj, model):
            inner.append(obj)
        frame, depth = frame.f_back, depth - 1
    return inner[1:]


def wraps(outer, model, depth=4):
    """Whether module ``outer`` wraps ``model``: it holds no parameters of
    its own, and each of its children is ``model`` or wraps it, ``depth``
    levels down at most (``DistributedDataParallel`` and ``DataParallel``
    hold the module they wrap as ``module``; Lightning Fabric's
    ``_FabricModule`` holds the module, or its strategy's wrapper, and the
    module, as ``_forward_module`` and ``_original_module``)."""
    d = getattr(outer, "__dict__", {})
    kids, own = d.get("_modules"), d.get("_parameters")
    if not isinstance(kids, dict) or not kids or own or depth <= 0:
        return False
    return all(k is model or wraps(k, model, depth - 1) for k in kids.values())


def first_tensor(is_tensor, args, kwargs):
    """Return the first tensor among ``args`` then ``kwargs`` values (one level
    into lists, tuples and dicts, as a batch from a DataLoader is), or None."""
    for a in args:
        t = _tensor_in(is_tensor, a)
        if t is not None:
            return t
    if kwargs:
        for a in kwargs.values():
            t = _tensor_in(is_tensor, a)
            if t is not None:
                return t
    return None


def _tensor_in(is_tensor, a):
    if is_tensor(a):
        return a
    if isinstance(a, (list, tuple)):
        for v in a[:8]:
            if is_tensor(v):
                return v
    elif isinstance(a, dict):
        for v in list(a.values())[:8]:
            if is_tensor(v):
                return v
    return None


def lead_tensor(batch, tensor_type):
    """The tensor a framework's ``batch`` leads with: the batch itself, its
    first item (a tuple or a list) or its first value (a dict), or None.
    Where there is one, it is what :func:`input_size` finds first."""
    if isinstance(batch, tensor_type):
        return batch
    if isinstance(batch, (tuple, list)):
        x = batch[0] if batch else None
    elif isinstance(batch, dict):
        x = next(iter(batch.values()), None)
    else:
        return None
    return x if isinstance(x, tensor_type) else None


def input_size(is_tensor, args, kwargs, tensor_type=None):
    """Return ``{"batch": int|None, "tokens": int|None}`` of a forward's inputs,
    or None when no tensor input was found (protocol additions item 1).
    ``tensor_type`` (``torch.Tensor``) lets a tensor first argument skip
    ``is_tensor``, a Python function in torch."""
    if args and tensor_type is not None and isinstance(args[0], tensor_type):
        t = args[0]
    else:
        t = first_tensor(is_tensor, args, kwargs)
    if t is None:
        return None
    return size_of(t)


def is_index(t):
    """Report whether tensor ``t`` holds integer indices (token ids): an
    integer dtype, not bool, floating or complex. Only those inputs have tokens."""
    dtype = getattr(t, "dtype", None)
    return dtype is not None and not getattr(dtype, "is_floating_point", True) \
        and not getattr(dtype, "is_complex", False) and str(dtype) != "torch.bool"


def size_of(t):
    """Return ``{"batch", "tokens"}`` of one input tensor: batch is dim 0;
    tokens is batch x dim 1 for an integer index input of >= 2 dims, else
    None (an image or a float feature matrix has no tokens: docs/hook.md)."""
    shape = t.shape
    if len(shape) == 0:
        return {"batch": None, "tokens": None}
    batch = int(shape[0])
    return {"batch": batch, "tokens": batch * int(shape[1])
            if len(shape) >= 2 and is_index(t) else None}


MAX_OUTPUT_TENSORS = 32


def queue_callback_of(torch):
    """Return autograd's ``queue_callback`` (end-of-backward callback), or None."""
    engine = getattr(getattr(getattr(torch, "autograd", None), "Variable", None),
                     "_execution_engine", None)
    return getattr(engine, "queue_callback", None)


def grad_tensors(torch, out, found, depth=0):
    """Append to ``found`` the tensors requiring grad in a forward's output (nested
    up to 3 levels in dicts, lists and tuples; at most MAX_OUTPUT_TENSORS)."""
    if len(found) >= MAX_OUTPUT_TENSORS:
        return
    if torch.is_tensor(out):
        if out.requires_grad:
            found.append(out)
    elif depth < 3 and isinstance(out, dict):
        for v in out.values():
            grad_tensors(torch, v, found, depth + 1)
    elif depth < 3 and isinstance(out, (list, tuple)):
        for v in out:
            grad_tensors(torch, v, found, depth + 1)


def holds_grad_tensor(out, tensor_type):
    """Whether a forward's output holds, at its first level (a tuple's or a
    list's items, a dict's values, as a transformers ModelOutput's), a
    tensor requiring grad: then :func:`grad_tensors` finds one too."""
    if isinstance(out, dict):
        out = out.values()
    elif not isinstance(out, (tuple, list)):
        return False
    for v in out:
        if isinstance(v, tensor_type) and v.requires_grad:
            return True
    return False


def kwargs_pre_hooks(module):
    """Report whether ``register_forward_pre_hook`` takes ``with_kwargs`` (torch >= 2.0)."""
    try:
        import inspect
        return "with_kwargs" in inspect.signature(module.register_forward_pre_hook).parameters
    except (TypeError, ValueError):
        return False


class _Inert:
    """What an unpickled Watcher becomes: every hook is a no-op."""

    def __getattr__(self, name):
        return _inert_hook


def _inert_hook(*args, **kwargs):
    return None


def inert():
    """Return the object an unpickled Watcher becomes (Watcher.__reduce__)."""
    return _Inert()
