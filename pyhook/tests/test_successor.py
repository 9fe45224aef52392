"""An optimizer made after watch() for the watched model takes the watch
over at its first step() after a backward in which the watched optimizer
did not step (vramscope/_successor.py; docs/hook.md, "Loop shapes").
The two-stage fine-tuning loop is a loop shape (loops.unfreeze,
test_loop_shapes.py); these are the rules around it. Real torch, the real
hook, an unstarted client."""

import copy
import gc
import pickle
import warnings
import weakref

import pytest

import loops
import vramscope
from test_stacks import begins, watched_client
from vramscope import _safe


def step_count(client):
    return sum(1 for n in (begins(client, None)) if n == "step")


def train(torch, model, opt, n, x, y):
    for _ in range(n):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


@pytest.fixture
def setup(torch_mod, monkeypatch):
    torch = torch_mod
    made = watched_client(monkeypatch)
    torch.manual_seed(0)
    model = loops.mlp(torch)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    return torch, made, model, x, y


def test_a_learning_rate_finders_optimizer_takes_the_watch_and_gives_it_back(setup):
    torch, made, model, x, y = setup
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = vramscope.watch(model, opt)
    train(torch, model, opt, 2, x, y)
    finder = torch.optim.Adam(model.parameters(), lr=1e-4)
    train(torch, model, finder, 3, x, y)
    assert handle.watcher.optimizer is finder
    train(torch, model, opt, 2, x, y)
    assert handle.watcher.optimizer is opt
    client = made[0]
    assert step_count(client) == 7, "one step per update, whichever optimizer made it"
    # every step but the first of each run begins with its zero_grad
    starts = [begins(client, s)[0] for s in range(7)]
    assert starts == ["zero_grad", "zero_grad", "forward", "zero_grad", "zero_grad",
                      "forward", "zero_grad"]
    handle.remove()
    assert "step" not in vars(finder) and "step" not in vars(opt)
    assert "zero_grad" not in vars(finder) and "zero_grad" not in vars(opt)


def test_two_optimizers_that_step_in_every_step_leave_the_watch_where_it_is(setup):
    # The watched one steps first in each step: the other's step() comes
    # after that step ended, with no backward of the next one yet.
    torch, made, model, x, y = setup
    opt = torch.optim.SGD(model[0].parameters(), lr=0.05)
    handle = vramscope.watch(model, opt)
    other = torch.optim.SGD(model[2].parameters(), lr=0.05)
    for _ in range(4):
        opt.zero_grad()
        other.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        other.step()
    assert handle.watcher.optimizer is opt
    assert step_count(made[0]) == 4
    handle.remove()


def test_an_optimizer_for_another_model_is_no_candidate(setup):
    torch, made, model, x, y = setup
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = vramscope.watch(model, opt)
    other = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.05)
    assert "step" not in vars(other)
    assert not handle.watcher._candidates
    handle.remove()


def test_the_optimizer_init_is_torchs_own_again_once_no_watch_lives(setup):
    torch, made, model, x, y = setup
    own = vars(torch.optim.Optimizer)["__init__"]
    first = vramscope.watch(model, torch.optim.SGD(model.parameters(), lr=0.05))
    second_model = loops.mlp(torch)
    second = vramscope.watch(second_model, torch.optim.SGD(second_model.parameters(), lr=0.05))
    assert vars(torch.optim.Optimizer)["__init__"] is not own
    first.remove()
    assert vars(torch.optim.Optimizer)["__init__"] is not own, "the second watch still follows"
    second.remove()
    assert vars(torch.optim.Optimizer)["__init__"] is own


def test_a_watch_that_fails_to_look_never_breaks_making_an_optimizer(setup, monkeypatch):
    torch, made, model, x, y = setup
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = vramscope.watch(model, opt)

    def broken(o):
        raise RuntimeError("broken look")

    monkeypatch.setattr(handle.watcher, "optimizer_made", broken)
    before = _safe.errors()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert new.param_groups and _safe.errors() == before + 1
    handle.remove()


def test_an_optimizer_made_again_each_epoch_is_freed_once_dropped(setup):
    # Nothing of the watch's holds a candidate, the optimizer it moved
    # from, nor the one it watches: their state (on a GPU, twice the model
    # for Adam) is freed once the loop drops them, as without the hook.
    torch, made, model, x, y = setup
    first = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    handle = vramscope.watch(model, first)
    train(torch, model, first, 2, x, y)
    refs = [weakref.ref(first)]
    del first
    for _ in range(3):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        refs.append(weakref.ref(opt))
        train(torch, model, opt, 2, x, y)
    unused = torch.optim.AdamW(model.parameters(), lr=1e-3)  # made, never stepped
    refs.append(weakref.ref(unused))
    assert handle.watcher.optimizer is opt
    assert step_count(made[0]) == 8
    gc.disable()
    try:
        del opt, unused
        assert [r() is None for r in refs] == [True, True, True, True, True]
    finally:
        gc.enable()
    assert handle.watcher.optimizer is None and handle.watcher.model is model
    handle.remove()


def test_a_candidate_pickles_and_copies_as_a_plain_optimizer(setup):
    torch, made, model, x, y = setup
    handle = vramscope.watch(model, torch.optim.SGD(model.parameters(), lr=0.05))
    new = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert "step" in vars(new)  # its look
    for copied in (pickle.loads(pickle.dumps(new)), copy.deepcopy(new)):
        copied.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        copied.step()  # the class's step, no look of the watch's
    handle.remove()
    assert "step" not in vars(new)


def test_a_watch_whose_optimizer_the_loop_dropped_goes_on_and_follows_the_next(setup):
    # The watch holds its optimizer weakly: dropped with no successor made,
    # it is freed, and the watch goes on (forwards, backwards, an
    # evaluation, no error nor warning) until a new optimizer trains the
    # model, which it then follows.
    torch, made, model, x, y = setup
    opt = torch.optim.Adam(model.parameters())
    handle = vramscope.watch(model, opt, activations_every=1)
    train(torch, model, opt, 2, x, y)
    del opt
    assert handle.watcher.optimizer is None and handle.watcher.active
    before = _safe.errors()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            model(x)
        new = torch.optim.SGD(model.parameters(), lr=0.05)
        train(torch, model, new, 3, x, y)
    assert _safe.errors() == before
    assert handle.watcher.optimizer is new
    handle.remove()
