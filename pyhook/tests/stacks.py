"""Faithful reproductions of the training stacks' call sequences, for driving the
real hook on a torch without those frameworks (docs/integrations.md).

Each follows the framework's source at the version named, and the order
observed on an H100 in /work/shared/recordings/h100/callorders/ (copied to
testdata/h100/callorders/): lightning 2.6.6, transformers 5.17, accelerate 1.15,
torch 2.11. ``LOG`` records the same events as callorder.py does, so a test can
compare a reproduction's order with the observed one line by line.
"""

import collections
import functools
import itertools


class Log:
    """Log records nested calls like callorder.py's ``log``/``wrap``."""

    def __init__(self):
        self.lines = []
        self.depth = 0

    def __call__(self, name):
        self.lines.append("  " * self.depth + name)

    def wrap(self, label, fn):
        @functools.wraps(fn)
        def w(*a, **k):
            self(label + " {")
            self.depth += 1
            try:
                return fn(*a, **k)
            finally:
                self.depth -= 1
                self("} " + label)
        return w


# ---- torch 2.x optimizer step hooks ------------------------------------------------

_hook_ids = itertools.count()


class _Removable:
    def __init__(self, hooks, key):
        self.hooks, self.key = hooks, key

    def remove(self):
        self.hooks.pop(self.key, None)


def torch2_step_hooks(torch, base):
    """Return ``base`` with torch 2.x's per-instance step hooks, as
    torch/optim/optimizer.py has them: ``Optimizer.__init__`` creates the
    instance dicts ``_optimizer_step_pre_hooks``/``_optimizer_step_post_hooks``
    and ``_patch_step_function`` wraps the class's ``step`` in
    ``profile_hook_step``, which calls ``pre_hook(self, args, kwargs)`` with
    ``args`` including ``self``, uses a returned ``(args, kwargs)``, and calls
    the post hooks only when ``step`` returned."""

    def profile_hook_step(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            self = args[0]
            for pre_hook in list(self._optimizer_step_pre_hooks.values()):
                result = pre_hook(self, args, kwargs)
                if result is not None:
                    if isinstance(result, tuple) and len(result) == 2:
                        args, kwargs = result
                    else:
                        raise RuntimeError("%s must return None or a tuple of "
                                           "(new_args, new_kwargs), but got %s." % (func, result))
            out = func(*args, **kwargs)
            for post_hook in list(self._optimizer_step_post_hooks.values()):
                post_hook(self, args, kwargs)
            return out
        wrapper.hooked = True
        return wrapper

    class Hooked(base):
        def __init__(self, *a, **k):
            self._optimizer_step_pre_hooks = collections.OrderedDict()
            self._optimizer_step_post_hooks = collections.OrderedDict()
            super().__init__(*a, **k)

        def register_step_pre_hook(self, hook):
            key = next(_hook_ids)
            self._optimizer_step_pre_hooks[key] = hook
            return _Removable(self._optimizer_step_pre_hooks, key)

        def register_step_post_hook(self, hook):
            key = next(_hook_ids)
            self._optimizer_step_post_hooks[key] = hook
            return _Removable(self._optimizer_step_post_hooks, key)

    Hooked.step = profile_hook_step(base.step)
    Hooked.__name__ = base.__name__
    return Hooked


# ---- accelerate 1.15 ------------------------------------------------------------------

class GradientState:
    """accelerate.state.GradientState: sync_gradients is False on accumulating micro-steps."""

    def __init__(self):
        self.sync_gradients = True


def accelerated_optimizer(torch, base=None):
    """Return accelerate's ``AcceleratedOptimizer`` (accelerate/optimizer.py): an
    ``Optimizer`` subclass whose ``__init__`` never calls ``Optimizer.__init__``,
    so the instance has no ``_optimizer_step_pre_hooks``; ``step`` and
    ``zero_grad`` reach the wrapped optimizer only when gradients sync.
    ``base`` defaults to torch's Optimizer; pass ``torch2_step_hooks(torch,
    torch.optim.Optimizer)`` to get torch 2.x's class on torch 1.13."""

    class AcceleratedOptimizer(base or torch.optim.Optimizer):
        def __init__(self, optimizer, device_placement=True, scaler=None, gradient_state=None):
            self.optimizer = optimizer
            self.scaler = scaler
            self.gradient_state = gradient_state or GradientState()
            self.device_placement = device_placement
            self._is_overflow = False
            if device_placement:
                self.optimizer.load_state_dict(self.optimizer.state_dict())

        @property
        def state(self):
            return self.optimizer.state

        @property
        def param_groups(self):
            return self.optimizer.param_groups

        @property
        def defaults(self):
            return self.optimizer.defaults

        def zero_grad(self, set_to_none=None):
            if self.gradient_state.sync_gradients:
                if set_to_none is None:
                    set_to_none = True
                self.optimizer.zero_grad(set_to_none=set_to_none)

        def step(self, closure=None):
            if self.gradient_state.sync_gradients:
                if self.scaler is not None:
                    self.scaler.step(self.optimizer, closure)
                    self.scaler.update()
                else:
                    self.optimizer.step(closure)

    return AcceleratedOptimizer


class Accelerator:
    """The parts of ``accelerate.Accelerator`` a loop touches: ``prepare`` wraps
    the optimizer; ``backward`` divides by the accumulation steps and calls
    ``loss.backward()`` (callorders/accelerate.txt: it reaches Tensor.backward)."""

    def __init__(self, torch, gradient_accumulation_steps=1):
        self.torch = torch
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.gradient_state = GradientState()

    def prepare(self, model, optimizer):
        base = None
        if not hasattr(self.torch.optim.Optimizer, "register_step_pre_hook"):
            base = torch2_step_hooks(self.torch, self.torch.optim.Optimizer)  # as on torch 2.x
        cls = accelerated_optimizer(self.torch, base)
        return model, cls(optimizer, gradient_state=self.gradient_state)

    def backward(self, loss, **kwargs):
        if self.gradient_accumulation_steps > 1:
            loss = loss / self.gradient_accumulation_steps
        loss.backward(**kwargs)


def accelerate_loop(torch, model, opt, accelerator, steps, batch=8, features=16):
    """The plain loop of callorder.py's ``accelerate_loop``."""
    for _ in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(batch, features)).square().mean()
        accelerator.backward(loss)
        opt.step()


# ---- transformers 5.17 Trainer -----------------------------------------------------------

class TrainerControl:
    def __init__(self):
        self.should_training_stop = False


class TrainerState:
    def __init__(self):
        self.global_step = 0
        self.epoch = 0.0


def hf_trainer_train(torch, model, optimizer, callbacks, batches, accumulation=2, log=None,
                     evaluate_every=0, eval_batch=None):
    """The inner loop of ``Trainer._inner_training_loop`` (transformers 5.17,
    trainer.py), with accelerate preparing the optimizer:

    on_train_begin(model=, optimizer=AcceleratedOptimizer) → model.zero_grad() →
    per optimizer step: on_step_begin, then per micro-step ``model(**inputs)``
    (keyword inputs; the loss comes out of the model) and
    ``accelerator.backward(loss)``, on_substep_end between micro-steps; then
    on_pre_optimizer_step → optimizer.step() → on_optimizer_step →
    lr_scheduler.step() → model.zero_grad() → on_step_end; evaluation under
    ``no_grad`` after on_step_end when due. Matches callorders/hf_trainer.txt.
    """
    accelerator = Accelerator(torch, gradient_accumulation_steps=accumulation)
    model, opt = accelerator.prepare(model, optimizer)
    args, state, control = object(), TrainerState(), TrainerControl()

    def fire(event, **kw):
        if log is not None:
            log("cb." + event)
        for cb in callbacks:
            fn = getattr(cb, event, None)
            if fn is not None:
                fn(args, state, control, **kw)

    fire("on_train_begin", model=model, optimizer=opt)
    model.zero_grad()
    fire("on_epoch_begin")
    it = iter(batches)
    while True:
        micro = []
        for _ in range(accumulation):
            b = next(it, None)
            if b is None:
                break
            micro.append(b)
        if len(micro) < accumulation:
            break
        fire("on_step_begin")
        for k, inputs in enumerate(micro):
            accelerator.gradient_state.sync_gradients = k == accumulation - 1
            model.train()
            outputs = model(**inputs)
            loss = outputs["loss"]
            accelerator.backward(loss)
            if k < accumulation - 1:
                fire("on_substep_end")
        fire("on_pre_optimizer_step")
        opt.step()
        fire("on_optimizer_step")
        model.zero_grad()
        state.global_step += 1
        fire("on_step_end")
        if evaluate_every and state.global_step % evaluate_every == 0:
            model.eval()
            with torch.no_grad():
                model(**eval_batch)
            fire("on_evaluate")
    fire("on_epoch_end")
    fire("on_train_end")


# ---- Lightning 2.6.6 automatic optimization --------------------------------------------------

class LightningOptimizer:
    """lightning/pytorch/core/optimizer.py: wraps the optimizer as ``_optimizer``;
    ``step(closure)`` routes through the strategy to the precision plugin, which
    calls the raw ``optimizer.step(closure=...)``."""

    def __init__(self, optimizer, strategy):
        self._optimizer = optimizer
        self._strategy = strategy
        # imitate the class of the wrapped object to make isinstance checks work
        self.__class__ = type("Lightning" + optimizer.__class__.__name__,
                              (self.__class__, optimizer.__class__), {})

    @property
    def optimizer(self):
        return self._optimizer

    # No zero_grad of its own: the optimizer class's runs on the wrapper, its
    # param_groups read through __getattr__ (as in Lightning 2.6.6). An earlier
    # reproduction delegated zero_grad to the optimizer and so hid that the
    # hook never saw manual optimization's opt.zero_grad().
    def __getattr__(self, item):
        return getattr(self._optimizer, item)

    def step(self, closure=None, **kwargs):
        if closure is None:
            closure = _do_nothing_closure  # manual optimization: step() without a closure
        return self._strategy.optimizer_step(self._optimizer, closure, **kwargs)


def _do_nothing_closure():
    return None


class LightningTrainer:
    """``Trainer.fit`` for automatic optimization, one optimizer
    (loops/training_epoch_loop.py, loops/optimization/automatic.py,
    plugins/precision/precision.py, strategies/strategy.py):

    on_train_batch_start → (accumulating batch: closure() directly; else
    LightningModule.optimizer_step → LightningOptimizer.step(closure) → raw
    ``optimizer.step(closure=wrapped)``) where the Closure runs training_step,
    then (first batch of an accumulation) on_before_zero_grad and
    ``optimizer.zero_grad()``, then on_before_backward, ``loss.backward()``,
    on_after_backward; the precision plugin's wrapper calls
    on_before_optimizer_step after the closure, inside ``step`` → on_train_batch_end.
    Validation runs under ``no_grad``. Matches callorders/lightning.txt.
    """

    def __init__(self, torch, callbacks=(), accumulate_grad_batches=1, log=None,
                 val_every=0, sanity_val=0, amp_skip=None):
        self.torch = torch
        self.callbacks = list(callbacks)
        self.accumulate_grad_batches = accumulate_grad_batches
        self.log = log
        self.val_every = val_every
        self.sanity_val = sanity_val
        self.optimizers = []
        self.lightning_module = None
        # MixedPrecision (plugins/precision/amp.py) when not None: the batch
        # indices whose scaler.step finds inf gradients and skips the update.
        self.amp_skip = amp_skip
        self._batch_idx = 0

    def _fire(self, name, *args):
        if self.log is not None:
            self.log("cb." + name)
        for cb in self.callbacks:
            fn = getattr(cb, name, None)
            if fn is not None:
                fn(self, self.lightning_module, *args)

    # strategy / precision plugin
    def optimizer_step(self, optimizer, closure, **kwargs):
        if self.amp_skip is not None:
            # MixedPrecision.optimizer_step: runs the closure itself, then
            # _after_closure, then scaler.step(optimizer), which calls
            # optimizer.step() only when the gradients are finite.
            result = closure()
            self._fire("on_before_optimizer_step", optimizer)
            if self._batch_idx not in self.amp_skip:
                optimizer.step(**kwargs)
            return result

        def wrapped_closure():
            result = closure()
            self._fire("on_before_optimizer_step", optimizer)  # precision._after_closure
            return result
        return optimizer.step(closure=wrapped_closure, **kwargs)

    def fit(self, module, batches, val_batch=None):
        torch = self.torch
        self.lightning_module = module
        module.trainer = self
        opt = module.configure_optimizers()
        self.optimizers = [opt]
        lopt = LightningOptimizer(opt, self)
        self._fire("on_fit_start")
        if self.sanity_val and val_batch is not None:
            with torch.no_grad():
                for _ in range(self.sanity_val):
                    module.validation_step(val_batch, 0)
        self._fire("on_train_start")
        self._fire("on_train_epoch_start")
        for batch_idx, batch in enumerate(batches):
            self._batch_idx = batch_idx
            self._fire("on_train_batch_start", batch, batch_idx)
            closure = self._make_closure(module, opt, batch, batch_idx)
            if (batch_idx + 1) % self.accumulate_grad_batches != 0:
                closure()
            else:
                module.optimizer_step(0, batch_idx, lopt, closure)
            self._fire("on_train_batch_end", None, batch, batch_idx)
            if self.val_every and (batch_idx + 1) % self.val_every == 0 and val_batch is not None:
                with torch.no_grad():
                    module.validation_step(val_batch, 0)
        self._fire("on_train_epoch_end")
        self._fire("on_train_end")
        self._fire("on_fit_end")

    def _make_closure(self, module, opt, batch, batch_idx):
        torch = self.torch
        first = batch_idx % self.accumulate_grad_batches == 0

        def closure():
            with torch.enable_grad():
                loss = module.training_step(batch, batch_idx)
                loss = loss / self.accumulate_grad_batches
                if first:
                    self._fire("on_before_zero_grad", opt)
                    module.optimizer_zero_grad(0, batch_idx, opt)
                self._fire("on_before_backward", loss)
                module.backward(loss)
                self._fire("on_after_backward")
            return loss
        return closure


def lightning_module_base(torch):
    """The LightningModule methods the loop calls (core/module.py defaults)."""

    class LightningModule(torch.nn.Module):
        def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
            optimizer.step(closure=optimizer_closure)

        def optimizer_zero_grad(self, epoch, batch_idx, optimizer):
            optimizer.zero_grad()

        def backward(self, loss, *args, **kwargs):
            loss.backward(*args, **kwargs)

    return LightningModule
