"""A Lightning ``Callback`` that watches the module and its optimizer::

    from vramscope.integrations.lightning import VramscopeCallback
    trainer = L.Trainer(callbacks=[VramscopeCallback()])

Importing this module does not import Lightning; ``VramscopeCallback`` does,
on first use (``lightning.pytorch``, else ``pytorch_lightning``), and raises
ImportError when neither is installed. Shaped like Lightning's own
``DeviceStatsMonitor``: no state but the watch, hooks that only observe.

Lightning's hooks map onto the five phases (automatic optimization, Lightning
2.6: loops/optimization/automatic.py; docs/integrations.md):

============================  =========================================
``on_train_start``            ``watch(pl_module, trainer.optimizers[0])``
``on_train_batch_start``      ``forward`` begins (``training_step``; its batch gives the size)
(in ``training_step``)        ``forward`` ends where the model's computation ends, ``loss``
                              follows (vramscope._training_step)
``on_before_zero_grad``       ``zero_grad`` begins
``on_before_backward``        ``backward`` begins
``on_after_backward``         ``backward`` ends
``on_before_optimizer_step``  ``step`` begins (the update, after the closure)
optimizer step returns        ``step`` ends, the step counter advances
``on_train_batch_end``        ends a ``step`` the optimizer never ran (a skipped AMP step);
                              with ``log_figures=True``, logs the last step's figures
``on_train_end``              the hooks are removed
============================  =========================================

Validation and sanity checks run under ``no_grad`` between steps and open no step;
a validation between two micro-batches of a step (``val_check_interval`` is
counted in batches) is an evaluation of that step.
"""

from .. import _safe
from ._common import Driver, lazy_class


class LightningHooks:
    """The callback's behaviour, without the framework base class (testable alone).

    ``log_figures=True`` logs each step's peak, held memory and the need
    (vramscope._figures) through every logger of the Trainer, at the
    Trainer's logging interval (``log_every_n_steps``), as
    ``vramscope/step_peak_allocated`` and so on."""

    def __init__(self, log_figures=False, **watch_kwargs):
        self._vramscope = Driver(watch_kwargs, log_figures)

    def on_train_start(self, trainer, pl_module):
        opts = list(getattr(trainer, "optimizers", None) or [])
        self._vramscope.start(pl_module, opts[0] if opts else None)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        self._vramscope.phase("forward", batch)

    def on_before_zero_grad(self, trainer, pl_module, optimizer):
        self._vramscope.phase("zero_grad")

    def on_before_backward(self, trainer, pl_module, loss):
        self._vramscope.phase("backward")

    def on_after_backward(self, trainer, pl_module):
        self._vramscope.end("backward")

    def on_before_optimizer_step(self, trainer, pl_module, optimizer, *args):
        self._vramscope.phase("step")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        self._vramscope.finish_open_step()
        if self._vramscope.log_figures:
            _safe.call(self._log_figures, trainer)

    def _log_figures(self, trainer):
        # At the Trainer's logging interval, as its DeviceStatsMonitor does.
        connector = getattr(trainer, "_logger_connector", None)
        if not getattr(connector, "should_update_logs", True):
            return
        figures = self._vramscope.unlogged_figures()
        if figures is None:
            return
        for logger in getattr(trainer, "loggers", None) or ():
            logger.log_metrics(figures.metrics(getattr(logger, "group_separator", "/")),
                               step=figures.step)

    def on_train_end(self, trainer, pl_module):
        self._vramscope.stop()

    def on_exception(self, trainer, pl_module, exception):
        self._vramscope.stop()


def _base():
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        try:
            from pytorch_lightning.callbacks import Callback
        except ImportError:
            raise ImportError("vramscope.integrations.lightning needs lightning "
                              "(or pytorch_lightning) installed") from None
    return Callback


def _build():
    base = _base()

    class VramscopeCallback(LightningHooks, base):
        """Watch the LightningModule and its optimizer with vramscope; keyword
        arguments go to ``vramscope.watch``."""

        def __init__(self, **watch_kwargs):
            base.__init__(self)
            LightningHooks.__init__(self, **watch_kwargs)

    VramscopeCallback.__module__ = __name__
    return VramscopeCallback


__getattr__ = lazy_class(globals(), "VramscopeCallback", _build)
