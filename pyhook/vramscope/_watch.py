"""Automatic phase detection for one model and optimizer (docs/hook.md).

Phases are sequential: beginning one ends the phase still open, so a phase
whose end cannot be observed (a forward under ``no_grad``, a backward without
an end callback) never stays open past the next one.
"""

import threading
import types

from . import _anatomy, _safe

FIRST_MEASURED = 3
MAX_OUTPUT_TENSORS = 32


def queue_callback_of(torch):
    """Return autograd's ``queue_callback`` (end-of-backward callback), or None."""
    engine = getattr(getattr(getattr(torch, "autograd", None), "Variable", None),
                     "_execution_engine", None)
    return getattr(engine, "queue_callback", None)


def has_step_hooks(optimizer):
    """Report whether ``optimizer`` has per-instance step pre/post hooks (torch >= 2.0)."""
    return (callable(getattr(optimizer, "register_step_pre_hook", None))
            and callable(getattr(optimizer, "register_step_post_hook", None)))


def patch_method(obj, name, before, after):
    """Wrap ``obj.name`` so ``before``/``after`` run around it; return an undo.

    The wrapper is a bound method of ``obj`` (torch 1.13's LR scheduler rebinds
    ``optimizer.step.__func__``). Undo restores the original when the attribute
    is still ours; when someone wrapped on top of us (a scheduler), it leaves
    our wrapper in place but inert, so their wrapper keeps working.
    """
    had_own = name in getattr(obj, "__dict__", {})
    original = getattr(obj, name)
    on = [True]

    report = _safe.report

    def method(_self, *args, **kwargs):
        # _safe.call inlined: this runs twice a step on the training thread.
        if on[0]:
            try:
                before()
            except Exception as exc:  # noqa: BLE001
                report(exc)
        try:
            return original(*args, **kwargs)
        finally:
            if on[0]:
                try:
                    after()
                except Exception as exc:  # noqa: BLE001
                    report(exc)

    method.__name__ = getattr(original, "__name__", name)
    method.__doc__ = getattr(original, "__doc__", None)
    method._vramscope_wrapper = True
    # Keep the markers LR schedulers put on the step they wrapped, so a
    # scheduler made before watch() still sees its counter in place.
    for marker in ("_with_counter", "_wrapped_by_lr_sched"):
        if getattr(original, marker, False):
            setattr(method, marker, True)
    bound = types.MethodType(method, obj)
    setattr(obj, name, bound)

    def undo():
        on[0] = False
        if obj.__dict__.get(name) is bound:
            if had_own:
                setattr(obj, name, original)
            else:
                delattr(obj, name)

    return undo


def _grad_tensors(torch, out, found, depth=0):
    if len(found) >= MAX_OUTPUT_TENSORS:
        return
    if torch.is_tensor(out):
        if out.requires_grad:
            found.append(out)
    elif depth < 3 and isinstance(out, dict):
        for v in out.values():
            _grad_tensors(torch, v, found, depth + 1)
    elif depth < 3 and isinstance(out, (list, tuple)):
        for v in out:
            _grad_tensors(torch, v, found, depth + 1)


class Watcher:
    """Watcher hooks one model (and optimizer) and emits its phases through a client."""

    def __init__(self, torch, client, model, optimizer, config, *, step_hooks=None,
                 queue_callback="detect", meter=None):
        self._torch = torch
        self._client = client
        self._model = model
        self._optimizer = optimizer
        self._config = config
        self._lock = threading.RLock()
        self._active = True
        self._open = None
        self._depth = 0
        self._skip_forward = False
        self._in_backward = False
        self._backward_micro = 0
        self._zero_depth = 0
        self._undo = []
        self._queue_callback = (queue_callback_of(torch) if queue_callback == "detect"
                                else queue_callback)
        if step_hooks is None:
            step_hooks = optimizer is not None and has_step_hooks(optimizer)
        self.uses_step_hooks = bool(step_hooks)
        if meter is None and config.activations_every > 0 \
                and _anatomy.SavedTensorMeter.supported(torch):
            meter = _anatomy.SavedTensorMeter(torch, model)
        self._meter = meter
        self._measured_step = False
        self._measuring = False
        self._acts = None
        self._batch = None
        # Bound once: registered on every forward's output and queued on
        # every backward, so no bound method is made per call.
        self._grad_hook = self._on_output_grad
        self._done_callback = self._on_backward_done
        self._prepare(client.step)
        self._install()

    # ---- installation ---------------------------------------------------------------

    def _install(self):
        m = self._model
        self._undo.append(m.register_forward_pre_hook(self._on_forward_pre).remove)
        self._undo.append(m.register_forward_hook(self._on_forward).remove)
        self._undo.append(patch_method(m, "zero_grad", self._zero_begin, self._zero_end))
        opt = self._optimizer
        if opt is None:
            return
        self._undo.append(patch_method(opt, "zero_grad", self._zero_begin, self._zero_end))
        if self.uses_step_hooks:
            pre = opt.register_step_pre_hook(lambda *_: self._guarded(self._step_begin))
            post = opt.register_step_post_hook(lambda *_: self._guarded(self._step_end))
            self._undo += [pre.remove, post.remove]
        else:
            self._undo.append(patch_method(opt, "step", self._step_begin, self._step_end))

    @staticmethod
    def _guarded(fn, *args):
        # _safe.call without its extra frame: the hooks below run every step.
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)

    @property
    def active(self):
        """True until remove()."""
        return self._active

    def remove(self):
        """Undo every hook and patch and close the open phase; idempotent."""
        with self._lock:
            if not self._active:
                return
            self._active = False
            self._stop_meter()
            if self._open is not None:
                self._end(self._open)
        for undo in reversed(self._undo):
            _safe.call(undo)
        self._undo = []

    # ---- phase bookkeeping -------------------------------------------------------

    def _begin(self, name, raw=None):
        # A begin edge has no allocator read of its own (docs/hook.md, "Cost"):
        # it carries the read of the end edge made in this same hook call
        # (``raw``, or the phase it closes here), else mem null.
        if self._open is not None:
            raw = self._end(self._open)
        self._open = name
        if name == "backward":
            self._backward_micro = self._client.micro
        self._client.edge(name, "begin", raw)

    def _end(self, name):
        # An end edge reads the allocator once and returns that read; but
        # zero_grad (which only frees) reads on the first steps only.
        if self._open != name:
            return None
        self._open = None
        client = self._client
        raw = None
        read = client.reader
        if read is not None and (name != "zero_grad" or client.step < FIRST_MEASURED):
            try:  # client.read_raw() inlined: a frame less at every end edge
                raw = read()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        if name == "backward":
            self._in_backward = False
            client.edge(name, "end", raw, micro=self._backward_micro)
            client.micro = self._backward_micro + 1
        else:
            client.edge(name, "end", raw)
        return raw

    # ---- measurement of a step -----------------------------------------------------

    def _measured(self, step):
        every = self._config.activations_every
        return step < FIRST_MEASURED or (every > 0 and step % every == 0)

    def _prepare(self, step):
        self._measured_step = self._measured(step)
        self._measuring = self._meter is not None and self._measured_step
        self._acts = None
        self._batch = None
        if self._measuring:  # an unmeasured step touches no meter
            self._meter.reset()

    def _stop_meter(self):
        meter = self._meter
        if meter is not None and meter.active:
            meter.stop()

    def _collect_activations(self):
        meter = self._meter
        if meter is None or not self._measuring or self._acts is None:
            return
        self._acts = max(self._acts, meter.total)
        meter.reset()

    # ---- hooks (each runs guarded: a failure is counted, never raised) ----------------

    def _on_forward_pre(self, module, args):
        if not self._active:
            return None
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return None
            if self._in_backward and self._queue_callback is not None:
                self._skip_forward = True  # recomputation inside backward (checkpointing)
                return None
            try:
                self._forward_begin(args)
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        return None

    def _forward_begin(self, args):
        self._begin("forward")
        if not self._measured_step:
            return
        if self._batch is None:
            for a in args:
                if self._torch.is_tensor(a):
                    if a.dim() > 0:
                        self._batch = int(a.shape[0])
                    break
        if self._measuring and self._torch.is_grad_enabled():
            if self._acts is None:
                self._acts = 0
            self._meter.start()

    def _on_forward(self, module, args, output):
        if not self._active:
            return None
        with self._lock:
            self._depth = max(0, self._depth - 1)
            if self._depth > 0:
                return None
            if self._skip_forward:
                self._skip_forward = False
                return None
            try:
                self._forward_end(output)
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        return None

    def _forward_end(self, output):
        self._stop_meter()
        raw = self._end("forward")
        if not self._torch.is_grad_enabled():
            return
        found = []
        _grad_tensors(self._torch, output, found)
        hook = self._grad_hook
        for t in found:
            t.register_hook(hook)
        if found:
            self._begin("loss", raw)  # no user code since forward's end: same read

    def _on_output_grad(self, grad):
        if not self._active or self._in_backward:
            return None
        with self._lock:
            if self._in_backward:
                return None
            self._in_backward = True
            try:
                self._backward_begin()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
        return None

    def _backward_begin(self):
        self._collect_activations()
        self._begin("backward")
        if self._queue_callback is not None:
            self._queue_callback(self._done_callback)

    def _on_backward_done(self):
        try:
            with self._lock:
                self._end("backward")
                self._in_backward = False
        except Exception as exc:  # noqa: BLE001 - raising here would fail backward()
            _safe.report(exc)

    def _zero_begin(self):
        if not self._active:
            return
        with self._lock:
            self._zero_depth += 1
            if self._zero_depth == 1:
                self._recover()
                self._begin("zero_grad")

    def _zero_end(self):
        if not self._active:
            return
        with self._lock:
            self._zero_depth = max(0, self._zero_depth - 1)
            if self._zero_depth == 0:
                self._end("zero_grad")

    def _recover(self):
        # A forward that raised leaves its meter installed and its depth counted.
        self._stop_meter()
        self._depth = 0
        self._skip_forward = False

    def _step_begin(self):
        if not self._active:
            return
        with self._lock:
            self._recover()
            self._begin("step")

    def _step_end(self):
        if not self._active:
            return
        with self._lock:
            self._end("step")
            step = self._client.step
            if self._measured(step):
                self._collect_activations()
                _safe.call(self._send_anatomy, step)
            self._client.step = step + 1
            self._client.micro = 0
            self._prepare(step + 1)

    def _send_anatomy(self, step):
        figures = _anatomy.static_figures(self._torch, self._model, self._optimizer)
        batch = self._config.batch_size if self._config.batch_size is not None else self._batch
        self._client.anatomy(step, {
            "weights": figures["weights"],
            "gradients": figures["gradients"],
            "optimizer": figures["optimizer"],
            "activations": self._acts if self._measuring else None,
            "batch_size": batch,
            "params": figures["params"],
            "device": figures["device"],
        })
