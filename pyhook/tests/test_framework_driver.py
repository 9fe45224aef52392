"""The framework callbacks' Driver (integrations/_common.py): its per-step
entries are the watch's own methods, bound at start (no frame of the
Driver's at a step), which never raise into the framework's loop; without
a watch they do nothing."""

import warnings

import pytest

from vramscope import _safe
from vramscope.integrations._common import Driver


def boom(*args, **kwargs):
    raise RuntimeError("a bug of the hook's")


@pytest.fixture
def driver(torch_mod, tmp_path):
    d = Driver({"socket": str(tmp_path / "none.sock")})
    model = torch_mod.nn.Linear(4, 2)
    opt = torch_mod.optim.SGD(model.parameters(), lr=0.1)
    d.start(model, opt, framework_steps=True)
    yield d, model, opt
    d.stop()


ENTRIES = [("phase", ("forward", None)), ("phase", ("step",)), ("end", ("backward",)),
           ("finish_step", ()), ("finish_open_step", ())]


def test_the_per_step_entries_are_the_watch_s_own_methods(driver):
    d, _, _ = driver
    w = d.watcher
    assert w is not None
    for name in ("phase", "end", "finish_step", "finish_open_step"):
        assert getattr(d, name).__self__ is w, name


@pytest.mark.parametrize("entry, args", ENTRIES)
def test_an_error_in_the_watch_never_reaches_the_framework(driver, monkeypatch, entry, args):
    d, _, _ = driver
    w = d.watcher
    w._fast = False  # the general paths, under the lock
    for name in ("_begin", "_end", "_finish_step", "_activity", "_backward_begin"):
        monkeypatch.setattr(w, name, boom)
    # a step under way, in the phase each entry does not begin
    w._open = "backward" if entry == "end" else None
    w._step_called, w._idle = True, False
    before = _safe._errors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert getattr(d, entry)(*args) is None  # it did not raise
    monkeypatch.undo()
    assert _safe._errors == before + 1


def test_without_a_watch_the_entries_do_nothing(driver):
    d, model, _ = driver
    d.stop()
    assert d.watcher is None
    for entry, args in ENTRIES:
        assert getattr(d, entry)(*args) is None
