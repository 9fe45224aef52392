"""A step at rest closes in one frame (Watcher._close_read): its one read,
its plan and its end edge. Its plan must be _plan's, whatever the read: the
binding's dict within the noise of the reference or past it, the host's six
values, a host read with no peak, a user's reset's read before the step's
own, and figures kept for a framework's logger. Each case is planned both
ways from the same state and compared: the closing edge's fields, whether
the next step reads its phases, and what the sampler compares with.
"""

import copy

import pytest

from test_reads import at_rest
from vramscope import _closing


@pytest.fixture
def rest(torch_mod):
    """(client, watcher, a read of the binding's shape) with the loop at rest."""
    with at_rest(torch_mod) as (client, watcher, _, _):
        assert watcher._ref is not None and not watcher._moved
        yield client, watcher, copy.deepcopy(torch_mod._C._cuda_memoryStats(0))


def past_noise(read):
    """More than the noise (max(2 MiB, 1 % of the peak)) above the read's peak."""
    return 2 * max(_closing.NOISE_BYTES, read["allocated_bytes"]["all"]["peak"] // 100)


def with_peak(read, peak, held=None):
    out = copy.deepcopy(read)
    a = out["allocated_bytes"]["all"]
    a["peak"] = peak
    if held is not None:
        a["current"] = held
    return out


def both_ways(client, watcher, reads):
    """(_plan's, _close_read's) (extra, moved, between) for ``reads``, the
    last one the step's own closing read, from the same state."""
    ref, moved, between = watcher._ref, watcher._moved, client.between
    step_reads = client.peaks.step_reads
    step_reads.clear()
    step_reads.extend(reads)
    want = (watcher._plan(), watcher._moved, client.between)
    assert not step_reads
    watcher._ref, watcher._moved, client.between = ref, moved, between
    step_reads.extend(reads[:-1])

    def reader():  # as DevicePeaks.read_reset keeps its read for the step
        step_reads.append(reads[-1])
        return reads[-1]

    reader_was, client.reader = client.reader, reader
    try:
        before = len(client._queue)
        watcher._close_read()
    finally:
        client.reader = reader_was
    assert len(client._queue) == before + 1 and not step_reads
    edge = client._queue[-1]
    # Client.switch's closing tuple: (t, end, step, micro, "end", False, raw, extra, model)
    assert edge[1:6] == ("step", client.step, client.micro, "end", False)
    assert edge[6] is reads[-1] and edge[8] == client.model
    got = (edge[7], watcher._moved, client.between)
    watcher._ref, watcher._moved = ref, moved
    return want, got


def test_a_read_within_the_noise_is_the_same_as_the_reference(rest):
    client, watcher, read = rest
    want, got = both_ways(client, watcher, [read])
    assert got == want
    assert got[0]["same_as"] == watcher._ref[4]["same_as"] and got[1] is False


def test_a_read_past_the_noise_moved_and_the_next_step_reads_its_phases(rest):
    client, watcher, read = rest
    peak = read["allocated_bytes"]["all"]["peak"] + past_noise(read)
    want, got = both_ways(client, watcher, [with_peak(read, peak)])
    assert got == want
    assert got[0] is _closing.SPAN_STEP and got[1] is True
    assert got[2][1] == peak


def test_held_memory_past_the_noise_moved_too(rest):
    client, watcher, read = rest
    a = read["allocated_bytes"]["all"]
    want, got = both_ways(client, watcher,
                          [with_peak(read, a["peak"], a["current"] + past_noise(read))])
    assert got == want and got[1] is True


def test_the_hosts_six_values_are_planned_as_the_plan_takes_them(rest):
    client, watcher, read = rest
    a = read["allocated_bytes"]["all"]
    for held, peak in ((a["current"], a["peak"]), (a["current"], a["peak"] << 1)):
        want, got = both_ways(client, watcher, [(held, peak, 0, 0, 0, 0)])
        assert got == want


def test_a_host_read_without_a_peak_goes_to_the_plan(rest):
    client, watcher, read = rest
    want, got = both_ways(client, watcher, [(123, None, 0, 0, 0, 0)])
    assert got == want


def test_a_users_reset_read_before_the_steps_own_counts_in_its_peak(rest):
    client, watcher, read = rest
    peak = read["allocated_bytes"]["all"]["peak"]
    earlier = with_peak(read, peak + past_noise(read))
    want, got = both_ways(client, watcher, [earlier, read])
    assert got == want
    assert got[1] is True and got[2][1] == peak + past_noise(read)


def test_kept_figures_see_the_steps_reads(rest):
    client, watcher, read = rest
    figures = watcher.keep_figures()
    assert figures is not None
    want, got = both_ways(client, watcher, [read])
    assert got == want
