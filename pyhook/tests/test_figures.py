"""The figures a framework callback logs (vramscope._figures): each step's
peak and held memory from the hook's reads, and the need."""

from vramscope._figures import StepFigures


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
