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
``on_train_end``          the hooks are removed
========================  ============================================================

Evaluation runs under ``no_grad`` after ``on_step_end`` and opens no step.
"""

from ._common import Driver, lazy_class


class TrainerHooks:
    """The callback's behaviour, without the framework base class (testable alone)."""

    def __init__(self, **watch_kwargs):
        self._vramscope = Driver(watch_kwargs)

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is not None:
            self._vramscope.start(model, optimizer, framework_steps=True)

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
