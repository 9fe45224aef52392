# Written by `vramscope run` (docs/run.md). Python runs the first
# sitecustomize it finds on sys.path, and this directory comes first on
# PYTHONPATH: so this module runs the sitecustomize it shadows, as Python
# would have, and arranges for vramscope's auto-attach to start once
# `import torch` completes. A process that never imports torch (pip, the
# torchrun launcher's helpers) pays for two small functions and nothing else.
# It never raises: a failure is one line on stderr and training goes on.
import os
import sys


def _vramscope_chain(here):
    from importlib.machinery import PathFinder

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = type(sys)("sitecustomize")
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _vramscope_attach():
    try:
        from vramscope import _autoattach
        _autoattach.install()
    except Exception as exc:  # noqa: BLE001 - never break the training process
        sys.stderr.write("vramscope: auto-attach is off in this process: %r\n" % (exc,))


def _vramscope_passed_through(exc):
    """Take exec_then_attach's frame out of the traceback of a failed
    import of torch, as the hook's wrappers do (vramscope/_tracebacks.py)."""
    try:
        from vramscope import _tracebacks
        _tracebacks.passed_through(exc, sys._getframe(1))
    except Exception:  # noqa: BLE001 - the import error goes on unchanged
        pass


class _VramscopeAfterTorch:
    """A meta path finder that calls _vramscope_attach once torch is imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_attach(module):
            try:
                exec_module(module)
            except BaseException as exc:
                _vramscope_passed_through(exc)
                raise
            _vramscope_attach()

        loader.exec_module = exec_then_attach
        return spec


def _vramscope_lifeline():
    """Say once when the monitor that started us dies.

    vramscope run hands us the read end of a pipe whose write end only it
    holds: VRAMSCOPE_LIFELINE is "FD:INODE". When it dies, SIGKILL included,
    the read returns b"". A daemon thread waits on it; the training thread
    never does. A process that inherited another file at FD (or none) finds
    another inode and ignores it, and so does every process after the first
    that takes the pipe (the variable is removed from our environment).
    """
    spec = os.environ.pop("VRAMSCOPE_LIFELINE", "")
    if not spec:
        return
    try:
        import stat
        import threading

        fd_text, _, inode_text = spec.partition(":")
        fd = int(fd_text)
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode) or st.st_ino != int(inode_text):
            return
        os.set_inheritable(fd, False)
    except (OSError, ValueError):
        return

    def wait():
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            return
        sys.stderr.write("vramscope: the monitor (vramscope run) is gone; training goes on, unmonitored\n")
        sys.stderr.flush()

    threading.Thread(target=wait, name="vramscope-lifeline", daemon=True).start()


def _vramscope_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    _vramscope_lifeline()
    try:
        _vramscope_chain(here)
    except Exception as exc:  # noqa: BLE001 - as Python reports a failing sitecustomize
        sys.stderr.write("Error in sitecustomize (chained by vramscope run): %r\n" % (exc,))
    if os.environ.get("VRAMSCOPE_AUTOATTACH", "1") == "0":
        return
    if "torch" in sys.modules:
        _vramscope_attach()
    else:
        sys.meta_path.insert(0, _VramscopeAfterTorch())


_vramscope_boot()
