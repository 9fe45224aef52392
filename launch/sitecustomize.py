# Written by `vramscope run` (docs/run.md). Python runs the first
# sitecustomize it finds on sys.path, and this directory comes first on
# PYTHONPATH: so this module attaches vramscope's hook to the process, then
# runs the sitecustomize it shadows, as Python would have. It never raises:
# a failure is one line on stderr and training goes on unhooked.
import os
import sys


def _vramscope_chain(here):
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _vramscope_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _vramscope_chain(here)
    except Exception as exc:  # noqa: BLE001 - as Python reports a failing sitecustomize
        sys.stderr.write("Error in sitecustomize (chained by vramscope run): %r\n" % (exc,))
    if os.environ.get("VRAMSCOPE_AUTOATTACH", "1") == "0":
        return
    try:
        from vramscope import _autoattach
        _autoattach.install()
    except Exception as exc:  # noqa: BLE001 - never break the training process
        sys.stderr.write("vramscope: auto-attach is off in this process: %r\n" % (exc,))


_vramscope_boot()
del _vramscope_boot, _vramscope_chain
