"""A transformers ``TrainerCallback`` that watches the model and its optimizer::

    from vramscope.integrations.transformers import VramscopeCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[VramscopeCallback()])

Importing this module does not import transformers; ``VramscopeCallback``
does, on first use, and raises ImportError without it. Shaped like the
callbacks in ``transformers/integrations/``: it only observes and never
changes ``control``.

The Trainer's hooks map onto the five phases (``Trainer._inner_training_loop``,
transformers 5.17; docs/integrations.md):

========================  ============================================================
``on_train_begin``        ``watch(model, optimizer)``; accelerate's wrapper is unwrapped
``on_step_begin``         nothing: forward (keyword inputs) and backward
                          (``accelerator.backward``) are detected; ``on_substep_end``
                          separates micro-steps
``on_pre_optimizer_step`` ``step`` begins
``on_optimizer_step``     ``step`` ends
``on_step_end``           the step ends after the Trainer's ``model.zero_grad()``, which
                          stays in the step it follows; the counter advances once per
                          optimizer step, also when a mixed-precision step was skipped
``on_log``                with ``log_figures=True``, the last step's figures join the logs
``on_train_end``          the hooks are removed
========================  ============================================================

Evaluation runs under ``no_grad`` after ``on_step_end`` and opens no step: it
is a user phase ``eval`` of the step it follows.
"""

import sys

from .. import _safe
from ._common import Driver, lazy_class


class TrainerHooks:
    """The callback's behaviour, without the framework base class (testable alone).

    ``log_figures=True`` adds the last finished step's peak, held memory and
    the need (vramscope._figures) to each of the Trainer's logs, as
    ``vramscope/step_peak_allocated`` and so on: in ``state.log_history``,
    and, since this callback then runs first in ``on_log``, to every
    ``report_to`` integration (they are callbacks the Trainer lists before
    the user's)."""

    def __init__(self, log_figures=False, **watch_kwargs):
        self._vramscope = Driver(watch_kwargs, log_figures)

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is not None:
            self._vramscope.start(model, optimizer, framework_steps=True)
        if self._vramscope.log_figures:
            _safe.call(self._go_first, sys._getframe(1))

    def _go_first(self, frame):
        # The caller is CallbackHandler.call_event: this callback moves to
        # the head of its list, so its on_log runs before the reporting
        # integrations'. Moving from index i to 0 while call_event walks the
        # list leaves its next item where it was (i + 1).
        handler = frame.f_locals.get("self")
        callbacks = getattr(handler, "callbacks", None)
        if type(callbacks) is list and self in callbacks:
            callbacks.remove(self)
            callbacks.insert(0, self)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._vramscope.log_figures and logs is not None:
            _safe.call(self._add_figures, state, logs)

    def _add_figures(self, state, logs):
        figures = self._vramscope.unlogged_figures()
        if figures is None:
            return
        history = getattr(state, "log_history", None)
        # Trainer.log appended a copy of these logs (and its step) just before.
        last = history[-1] if history else None
        mine = type(last) is dict and all(last.get(k) == v for k, v in logs.items())
        figures = figures.metrics("/")
        logs.update(figures)
        if mine:
            last.update(figures)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._vramscope.phase("step")

    def on_optimizer_step(self, args, state, control, **kwargs):
        self._vramscope.end("step")

    def on_step_end(self, args, state, control, **kwargs):
        self._vramscope.finish_step()

    def on_train_end(self, args, state, control, **kwargs):
        self._vramscope.stop()


def _build():
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError("vramscope.integrations.transformers needs transformers "
                          "installed") from None

    class VramscopeCallback(TrainerHooks, TrainerCallback):
        """Watch the Trainer's model and optimizer with vramscope; keyword
        arguments go to ``vramscope.watch``."""

        def __init__(self, **watch_kwargs):
            TrainerHooks.__init__(self, **watch_kwargs)

    VramscopeCallback.__module__ = __name__
    return VramscopeCallback


__getattr__ = lazy_class(globals(), "VramscopeCallback", _build)
