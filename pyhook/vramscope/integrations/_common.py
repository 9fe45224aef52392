"""What both framework callbacks share: one watch per fit, driven by the
framework's own hooks, and a lazily built class (the framework is imported
when the callback class is first used, never when this package is imported)."""

from .. import _api, _safe


class Driver:
    """Driver owns the Handle of one fit and forwards framework hooks to its Watcher.

    Nothing here raises: a callback that raises would stop the framework's
    training loop, and the hook's first promise is that it never breaks
    training. The per-step entries are the Watcher's own methods, which
    report their errors themselves; the rest is guarded here.
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
        self._bind(None)

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
            self._bind(w)
        _safe.call(go)

    def unlogged_figures(self):
        """The figures (vramscope._figures.StepFigures) when they hold a
        step not logged yet, which counts as logged from now; else None."""
        f = self.figures
        if f is None or f.step <= self.logged:
            return None
        self.logged = f.step
        return f

    # The four entries below run at every step: the watch's own methods,
    # which never raise, bound at start() (a frame less each callback:
    # docs/hook.md, "Cost"); without a watch, nothing.

    def _bind(self, w):
        if w is None:
            self.phase = self.end = _ignore
            self.finish_step = self.finish_open_step = _ignore
        else:
            self.phase, self.end = w.framework_phase, w.framework_end
            self.finish_step, self.finish_open_step = w.finish_step, w.finish_open_step

    def stop(self):
        self.figures, self.logged = None, -1
        self._bind(None)
        h, self.handle = self.handle, None
        if h is not None:
            _safe.call(h.remove)


def _ignore(*args):
    """A per-step entry of a Driver with no watch."""


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
