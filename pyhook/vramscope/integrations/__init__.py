"""Framework integrations, each in its own module and each importing its
framework only when its callback class is first used (docs/integrations.md):

* ``vramscope.integrations.lightning.VramscopeCallback`` — a Lightning ``Callback``
* ``vramscope.integrations.transformers.VramscopeCallback`` — a transformers ``TrainerCallback``

A plain accelerate loop needs no integration: ``vramscope.watch(model, optimizer)``
after ``accelerator.prepare(...)`` unwraps the ``AcceleratedOptimizer``.
"""
