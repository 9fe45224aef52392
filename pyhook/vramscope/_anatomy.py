"""Exact tensor accounting: weights, gradients, optimizer state and the
activations autograd saves for backward (docs/anatomy.md).

Every figure counts each *storage* once, keyed by its data pointer, so tied
weights, views and a tensor saved by several ops are not counted twice.
"""


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
    get = _getters.get(type(t)) or _getter_of(type(t))
    s = get(t)
    nbytes = getattr(s, "nbytes", None)
    if nbytes is not None:
        size = nbytes()
    else:
        size = s.size() * s.element_size()
    return (t.device.type, s.data_ptr()), int(size)


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


def static_figures(torch, model, optimizer):
    """Return weights, gradients, optimizer bytes, params and device."""
    params = list(model.parameters())
    buffers = list(model.buffers())
    weights = unique_bytes(params + buffers)
    gradients = unique_bytes(p.grad for p in params if p.grad is not None)
    state = 0
    if optimizer is not None:
        state = unique_bytes(_tensors_in(list(optimizer.state.values()), torch.is_tensor))
    first = params[0] if params else (buffers[0] if buffers else None)
    return {
        "weights": weights,
        "gradients": gradients,
        "optimizer": state,
        "params": sum(p.numel() for p in params),
        "device": first.device.type if first is not None else "cpu",
    }


class SavedTensorMeter:
    """SavedTensorMeter counts the bytes autograd saves for backward.

    ``start()`` installs ``torch.autograd.graph.saved_tensors_hooks`` whose
    pack hook records each saved tensor's storage (parameters and buffers
    excluded) and returns the same data (a detached alias); ``stop()`` removes them. The
    meter is only active between those calls, so unmeasured steps pay nothing.
    """

    def __init__(self, torch, model):
        self._torch = torch
        self._model = model
        self._ctx = None
        self._seen = {}
        self._exclude = set()
        self.total = 0

    @staticmethod
    def supported(torch):
        """Report whether this torch has saved-tensor hooks."""
        graph = getattr(getattr(torch, "autograd", None), "graph", None)
        return hasattr(graph, "saved_tensors_hooks")

    def reset(self):
        """Forget what was counted (start of a new micro-step)."""
        self._seen = {}
        self.total = 0

    def start(self):
        """Install the saved-tensor hooks (no-op when already active)."""
        if self._ctx is not None:
            return
        self._exclude = {storage_of(t)[0] for t in
                         list(self._model.parameters()) + list(self._model.buffers())}
        ctx = self._torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        ctx.__enter__()
        self._ctx = ctx

    def stop(self):
        """Remove the saved-tensor hooks if installed."""
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.__exit__(None, None, None)

    @property
    def active(self):
        """True while the hooks are installed."""
        return self._ctx is not None

    def _pack(self, t):
        try:
            key, size = storage_of(t)
            if key not in self._exclude and key not in self._seen and key[1] != 0:
                self._seen[key] = size
                self.total += size
        except Exception as exc:  # noqa: BLE001 - never break autograd
            from . import _safe
            _safe.report(exc)
        # An alias, not ``t`` itself: returning an op's own output would make
        # output -> grad_fn -> saved -> output a cycle that outlives a forward
        # without backward. The alias shares storage and version counter.
        return t.detach()


def _unpack(t):
    return t
