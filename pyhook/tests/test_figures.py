"""The figures a framework callback logs (vramscope._figures): each step's
peak and held memory from the hook's reads, and the need."""

import os
import sys

from conftest import ROOT, make_config
from vramscope import _client, _cuda, _watch
from vramscope._figures import StepFigures

sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.dirname(__file__))
import fakecuda  # noqa: E402
import pinloop  # noqa: E402


def read(allocated, peak):
    """A read_raw() tuple: allocated, max_allocated, reserved, max_reserved."""
    return (allocated, peak, allocated, peak, None, None)


def test_step_peak_is_the_largest_read_and_held_the_last():
    f = StepFigures()
    f.add(0, [read(10, 50), read(20, 90), read(15, 30)])
    assert (f.step, f.peak, f.held, f.need, f.need_exact) == (0, 90, 15, 90, True)


def test_the_need_leaves_step_0_out_once_step_1_ended():
    f = StepFigures()
    f.add(0, [read(10, 200)])  # the first step warms caches and makes optimizer state
    f.add(1, [read(10, 80)])
    assert f.need == 80
    f.add(2, [read(10, 120)])
    f.add(3, [read(10, 100)])
    assert (f.need, f.peak) == (120, 100)
    assert f.metrics() == {"vramscope/step_peak_allocated": 100.0,
                           "vramscope/held_allocated": 10.0,
                           "vramscope/need_allocated": 120.0, "vramscope/need_exact": 1.0}


def test_a_step_without_a_read_makes_the_need_a_bound():
    f = StepFigures()
    f.add(0, [read(10, 50)])
    f.add(1, [read(10, 60)])
    f.add(2, [None])
    assert (f.step, f.need, f.need_exact) == (1, 60, False)
    assert f.metrics(".")["vramscope.need_exact"] == 0.0


def test_held_is_what_stays_after_a_zero_grad_that_ends_the_step(torch_mod):
    """A loop that zeroes after the update (the HF Trainer's): the step's
    held memory, as the monitor's step table has it, is read after that
    zero_grad, the gradients it freed gone; the figures logged say the same
    (they said the memory before it: on a GPU, the gradients' bytes more)."""
    torch = torch_mod
    sim = fakecuda.SimAllocator().install(torch)
    try:
        client = _client.Client(make_config(sample_hz=0), cuda=_cuda.CudaStats(torch, 0),
                                start=False)
        step = [0]
        model = pinloop.Net(sim, step)
        opt = pinloop.SimSGD(model.parameters(), sim, step)
        watcher = _watch.Watcher(torch, client, model, opt, client.config)
        figures = watcher.keep_figures()
        for i in range(6):
            step[0] = min(i, 3)
            model(torch.randn(16, 8)).pow(2).sum().backward()
            opt.step()
            before = sim.allocated
            model.zero_grad()
            assert (figures.step, figures.held) == (i, sim.allocated)
            assert i == 0 or sim.allocated < before  # the seed-001 run's zero_grad frees
        watcher.remove()
    finally:
        sim.uninstall()
