"""What both framework callbacks share: one watch per fit, driven by the
framework's own hooks, and a lazily built class (the framework is imported
when the callback class is first used, never when this package is imported)."""

from .. import _api, _safe


class Driver:
    """Driver owns the Handle of one fit and forwards framework hooks to its Watcher.

    Every method is guarded: a callback that raises would stop the framework's
    training loop, and the hook's first promise is that it never breaks training.
    """

    def __init__(self, watch_kwargs, log_figures=False):
        self.watch_kwargs = dict(watch_kwargs)
        self.handle = None
        # Whether the callback logs vramscope's figures through the
        # framework's logger (off by default); the figures the watch keeps,
        # and the last step logged.
        self.log_figures = bool(log_figures)
        self.figures = None
        self.logged = -1

    @property
    def watcher(self):
        h = self.handle
        return h.watcher if h is not None else None

    def start(self, model, optimizer, framework_steps=False):
        def go():
            self.stop()
            self.handle = _api.watch(model, optimizer, **self.watch_kwargs)
            w = self.watcher
            if w is not None:
                w.framework_steps = framework_steps
                if self.log_figures:
                    self.figures = w.keep_figures()
        _safe.call(go)

    def unlogged_figures(self):
        """The figures (vramscope._figures.StepFigures) when they hold a
        step not logged yet, which counts as logged from now; else None."""
        f = self.figures
        if f is None or f.step <= self.logged:
            return None
        self.logged = f.step
        return f

    # The four below run at every step: the watcher property and _safe.call
    # are written out, two frames less each (docs/hook.md, "Cost").

    def phase(self, name, batch=None):
        h = self.handle
        w = h.watcher if h is not None else None
        if w is not None:
            try:
                w.framework_phase(name, batch)
            except Exception as exc:  # noqa: BLE001 - never break the training loop
                _safe.report(exc)

    def end(self, name):
        h = self.handle
        w = h.watcher if h is not None else None
        if w is not None:
            try:
                w.framework_end(name)
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)

    def finish_step(self):
        h = self.handle
        w = h.watcher if h is not None else None
        if w is not None:
            try:
                w.finish_step()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)

    def finish_open_step(self):
        h = self.handle
        w = h.watcher if h is not None else None
        if w is not None:
            try:
                w.finish_open_step()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)

    def stop(self):
        self.figures, self.logged = None, -1
        h, self.handle = self.handle, None
        if h is not None:
            _safe.call(h.remove)


def lazy_class(module_globals, name, build):
    """Return a module ``__getattr__`` that builds ``name`` with ``build()`` on first use."""

    def __getattr__(attr):
        if attr != name:
            raise AttributeError("module %r has no attribute %r"
                                 % (module_globals["__name__"], attr))
        cls = module_globals.get("_built")
        if cls is None:
            cls = build()
            module_globals["_built"] = cls
        return cls

    return __getattr__
