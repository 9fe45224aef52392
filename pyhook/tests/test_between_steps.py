"""Memory used between steps by something the hook does not see.

A plain step reads the allocator once, where it closes, and with exact peaks
that read's peak covers everything since the last step's closing read. The
sampler thread watches the stretch between steps; when memory rose there
with nothing of the hook's open, the next step's first phase reads once
more before it begins: a user phase ``between_steps`` of the step just
ended (docs/hook.md, "Between steps"). On the simulated H100 allocator
(bench/fakecuda.py SimAllocator, the seed-001 model's figures), the
sampler a real thread at 100 Hz.
"""

import os
import sys
import time

from conftest import ROOT, make_config, queued
from vramscope import _client, _cuda, _watch

sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.dirname(__file__))
import fakecuda  # noqa: E402
import pinloop  # noqa: E402

HZ = 100
PERIOD = 1.0 / HZ
STEPS = 8
AFTER = 5  # the step after which something happens: a plain step, read once
STEP_PEAK = 4518008832  # every step's peak from step 1 on (test_exact_peaks)
HELD = 1730501120  # held at every step's end from step 1 on
BIG = 4 << 30  # more than a step's peak on top of what it holds


def run(torch, between, sample_hz=HZ, zero_after=False, after_last=None):
    """STEPS steps of the pinloop model; ``between(sim, client, watcher, x)``
    runs after step AFTER's update (and its zero_grad, ``zero_after``),
    ``after_last(sim)`` after the last step, before the watch is removed.
    Returns the queued messages."""
    sim = fakecuda.SimAllocator().install(torch)
    try:
        client = _client.Client(make_config(sample_hz=sample_hz),
                                cuda=_cuda.CudaStats(torch, 0), start=False)
        client.start_sampler()
        step = [0]
        model = pinloop.Net(sim, step)
        opt = pinloop.SimSGD(model.parameters(), sim, step)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        x = torch.randn(16, 8)
        for i in range(STEPS):
            step[0] = i
            if not zero_after:
                model.zero_grad()
            loss = model(x).pow(2).sum()
            sim.phase(i, "loss")
            loss.backward()
            opt.step()
            if zero_after:
                model.zero_grad()
            if i == AFTER:
                between(sim, client, w, x)
        if after_last is not None:
            after_last(sim)
        w.remove()
        msgs = queued(client)
        client.close("removed", timeout=0)
        return msgs
    finally:
        sim.uninstall()


def hold(sim, client, nbytes, until=lambda: True, periods=3):
    """Hold ``nbytes`` for ``periods`` sampler periods, and longer (up to 5
    s, on a loaded machine) until a sample read it and ``until()`` says so."""
    before = len(client._queue)
    h = sim.malloc(nbytes)
    low = sim.allocated
    start = time.monotonic()
    while time.monotonic() - start < 5:
        time.sleep(PERIOD / 4)
        if time.monotonic() - start < periods * PERIOD:
            continue
        seen = any(type(m) is dict and m.get("type") == "sample"
                   and m["mem"]["max_allocated"] >= low for m in list(client._queue)[before:])
        if seen and until():
            break
    sim.free(h)


def unseen_held(sim, client, w, x):
    # An EMA copy evaluated, a teacher's forward: no forward of the watched model.
    hold(sim, client, BIG, until=lambda: w._unseen is not None)


def rest(sim, client, w, x):
    hold(sim, client, 0)


def watched_eval(sim, client, w, x):
    import torch
    with torch.no_grad():
        model = w.model
        model(x)  # the hook's evaluation: a user phase eval, read at its begin
        hold(sim, client, BIG)


def steps_reads(msgs):
    """{step: [(name, mem)]} of the training phases' end edges that read."""
    out = {}
    for m in msgs:
        if m["type"] == "phase" and not m.get("user") and m["edge"] == "end" \
                and m["mem"] is not None:
            out.setdefault(m["step"], []).append((m["name"], m["mem"]))
    return out


def user_phases(msgs, name):
    return [m for m in msgs if m["type"] == "phase" and m.get("user") and m["name"] == name]


def test_memory_held_between_steps_unseen_is_a_phase_of_the_step_just_ended(torch_mod):
    msgs = run(torch_mod, unseen_held)
    begin, end = user_phases(msgs, _watch.BETWEEN)
    assert begin["edge"] == "begin" and end["edge"] == "end"
    assert begin["step"] == end["step"] == AFTER and begin["mem"] is None
    # Its exact peak: what the step held, and what was taken on top of it.
    assert end["mem"]["max_allocated"] == HELD + BIG
    # It comes before the next step's first edge; that step's one read
    # is its own exact peak, the same as the last breakdown step's.
    first = next(i for i, m in enumerate(msgs) if m["type"] == "phase"
                 and m["step"] == AFTER + 1 and not m.get("user"))
    assert msgs.index(end) < first
    reads = steps_reads(msgs)
    (name, mem), = reads[AFTER + 1]
    assert name == "step" and mem["max_allocated"] == STEP_PEAK
    nxt = [m for m in msgs if m["type"] == "phase" and m["step"] == AFTER + 1
           and m.get("span") == "step"]
    assert nxt[0]["same_as"] == 2
    assert max(mem["max_allocated"] for _, mem in reads[AFTER]) == STEP_PEAK


def test_a_loop_at_rest_between_steps_reads_nothing_more(torch_mod):
    msgs = run(torch_mod, rest)
    assert any(m["type"] == "sample" for m in msgs)  # the sampler ran between steps
    assert user_phases(msgs, _watch.BETWEEN) == []
    reads = steps_reads(msgs)
    for s in range(3, STEPS):
        (name, mem), = reads[s]  # a plain step's single read
        assert name == "step" and mem["max_allocated"] == STEP_PEAK


def test_with_sampling_off_the_next_step_takes_it(torch_mod):
    # The documented limit (docs/hook.md, "Between steps"): no sampler, no
    # read between steps; the next step's one read covers that memory.
    msgs = run(torch_mod, lambda sim, client, w, x: _hold_unsampled(sim), sample_hz=0)
    assert not any(m["type"] == "sample" for m in msgs)
    assert user_phases(msgs, _watch.BETWEEN) == []
    (name, mem), = steps_reads(msgs)[AFTER + 1]
    assert name == "step" and mem["max_allocated"] == HELD + BIG


def _hold_unsampled(sim):
    h = sim.malloc(BIG)
    time.sleep(3 * PERIOD)
    sim.free(h)


def test_an_evaluation_the_hook_sees_stays_eval(torch_mod):
    msgs = run(torch_mod, watched_eval)
    assert user_phases(msgs, _watch.BETWEEN) == []
    begin, end = user_phases(msgs, "eval")
    assert begin["step"] == end["step"] == AFTER
    assert end["mem"]["max_allocated"] >= HELD + BIG
    (name, mem), = steps_reads(msgs)[AFTER + 1]
    assert name == "step" and mem["max_allocated"] == STEP_PEAK


def test_in_a_loop_that_zeroes_after_the_update_it_follows_the_zero_grad(torch_mod):
    # The zero_grad that ends each step reads after the step's closing read
    # (the memory held between steps, the gradients freed): the stretch
    # between steps starts there.
    msgs = run(torch_mod, unseen_held, zero_after=True)
    tail = [m for m in msgs if m["type"] == "phase" and m["name"] == "zero_grad"
            and m["edge"] == "end" and m["step"] == AFTER]
    begin, end = user_phases(msgs, _watch.BETWEEN)
    assert begin["step"] == end["step"] == AFTER
    assert end["mem"]["max_allocated"] == tail[-1]["mem"]["allocated"] + BIG
    reads = steps_reads(msgs)
    peak = max(mem["max_allocated"] for name, mem in reads[AFTER - 1] if name == "step")
    assert [(name, mem["max_allocated"]) for name, mem in reads[AFTER + 1] if name == "step"] \
        == [("step", peak)]


def test_what_runs_after_the_last_step_is_read_when_the_watch_ends(torch_mod):
    # A last evaluation of an EMA copy after training: no next step reads it,
    # so remove() (and the process's exit) does, once, with no sampler.
    def unseen_after_last(sim):
        sim.free(sim.malloc(BIG))

    msgs = run(torch_mod, rest, sample_hz=0, after_last=unseen_after_last)
    begin, end = user_phases(msgs, _watch.BETWEEN)
    assert begin["step"] == end["step"] == STEPS - 1
    assert end["mem"]["max_allocated"] == HELD + BIG


def test_a_cpu_run_sends_nothing_between_steps(torch_mod):
    # The RSS between steps moves for reasons of Python's own (objects,
    # compiled code, pages kept); only the CUDA allocator's memory is read
    # there. 64 MiB resident after the last step, still held at remove().
    import torch
    from vramscope import _devices
    client = _client.Client(make_config(), cuda=_devices.HostStats(), start=False)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(STEPS):
        opt.zero_grad()
        model(torch.randn(16, 8)).pow(2).sum().backward()
        opt.step()
    kept = bytearray(64 << 20)
    kept[::4096] = b"\1" * len(kept[::4096])  # pages written: resident
    w.remove()
    msgs = queued(client)
    client.close("removed", timeout=0)
    assert any(m["type"] == "phase" and m["name"] == "step" for m in msgs)
    assert user_phases(msgs, _watch.BETWEEN) == []
