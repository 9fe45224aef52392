"""Pins the number of allocator reads a training step makes (docs/hook.md, "Cost").

Each read is one call of torch._C._cuda_memoryStats, which costs 12.8 us
median on an H100 with torch 2.11 (shared/recordings/h100/README.md), so the
read count is the hook's cost per step. Deterministic: calls are counted,
nothing is timed (bench/cost_model.py times them).
"""

import contextlib
import os
import sys
import types

import pytest

from conftest import load_fixture_stats, make_config, nested_of, queued
from vramscope import _client, _cuda, _messages, _watch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
import fakecuda  # noqa: E402

# The design: one read per end edge, shared with the begin edge that follows
# in the same hook call; begins otherwise carry mem null; zero_grad (which
# only frees) reads its end on the first steps (0-2) only.
PLAIN_STEP_READS = 4  # forward end (= loss begin), loss end (= backward begin), backward end, step end
MEASURED_STEP_READS = 4  # saved-activation accounting reads nothing
FIRST_STEP_READS = 5  # ... and zero_grad end
MICRO_STEP_READS = 3  # forward end, loss end, backward end per forward/backward pass


class Binding:
    """torch._C._cuda_memoryStats: counts calls, returns the real torch 2.3 shape."""

    def __init__(self):
        self.calls = 0
        self.stats = nested_of(load_fixture_stats())

    def __call__(self, device):
        self.calls += 1
        return self.stats


class FakeCudaModule:
    """The torch.cuda functions CudaStats uses; the Python wrapper counts its calls."""

    def __init__(self, binding, initialized=True):
        self.binding = binding
        self.initialized = initialized
        self.init_checks = 0
        self.wrapper_calls = 0

    def is_initialized(self):
        self.init_checks += 1
        return self.initialized

    def memory_stats_as_nested_dict(self, device=None):
        self.wrapper_calls += 1
        return self.binding(device) if self.initialized else {}

    def reset_peak_memory_stats(self, device=None):
        pass

    def get_device_properties(self, device):
        return types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=85024112640)


def counted_cuda(with_binding=True):
    binding = Binding()
    cuda = FakeCudaModule(binding)
    fake_torch = types.SimpleNamespace(cuda=cuda)
    if with_binding:
        fake_torch._C = types.SimpleNamespace(_cuda_memoryStats=binding)
    return _cuda.CudaStats(fake_torch, 0), binding, cuda


def watched(torch, step, activations_every=100, with_binding=True):
    stats, binding, cuda = counted_cuda(with_binding)
    client = _client.Client(make_config(sample_hz=0, activations_every=activations_every),
                            cuda=stats, start=False)
    client.step = step
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    return client, model, opt, binding, cuda, watcher


def plain_step(torch, model, opt):
    opt.zero_grad()
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()


@contextlib.contextmanager
def at_rest(torch):
    """(client, watcher, model, opt) of a small loop on the cost model's fake
    allocator (bench/fakecuda.py, reads at no cost), past the steps that
    read every phase: its steps take the fast paths. Removed after."""
    fake = fakecuda.FakeAllocator(0).install(torch)
    client = watcher = None
    try:
        client = _client.Client(make_config(sample_hz=0), cuda=_cuda.detect(torch, None),
                                start=False)
        client.step = 3
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                    torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        watcher = _watch.Watcher(torch, client, model, opt, client.config)
        for _ in range(6):
            plain_step(torch, model, opt)
        assert watcher._fast, "the loop is at rest"
        yield client, watcher, model, opt
    finally:
        if watcher is not None:
            watcher.remove()
        if client is not None:
            client.close("removed", timeout=0)
        fake.uninstall()


@pytest.mark.parametrize("with_binding", [True, False])
def test_plain_step_reads_the_allocator_four_times(torch_mod, with_binding):
    client, model, opt, binding, cuda, _ = watched(torch_mod, step=5, with_binding=with_binding)
    for i in range(2):  # one loop line: zero_grad heads each step (a zero-after loop reads its tail too)
        before = binding.calls
        plain_step(torch_mod, model, opt)
    assert binding.calls - before == PLAIN_STEP_READS
    if with_binding:
        assert cuda.wrapper_calls == 0, "the binding is called directly"
        assert cuda.init_checks == 1, "is_initialized is asked until it says yes"
    else:
        assert cuda.wrapper_calls == binding.calls


def test_first_steps_read_zero_grad_end_too_measured_steps_do_not(torch_mod):
    client, model, opt, binding, _, _ = watched(torch_mod, step=0)
    for _ in range(3):
        plain_step(torch_mod, model, opt)
    assert binding.calls == 3 * FIRST_STEP_READS
    plain_step(torch_mod, model, opt)
    assert binding.calls == 3 * FIRST_STEP_READS + PLAIN_STEP_READS
    client2, model2, opt2, binding2, _, w = watched(torch_mod, step=7, activations_every=1)
    plain_step(torch_mod, model2, opt2)
    assert binding2.calls == MEASURED_STEP_READS
    anatomy = [m for m in queued(client2) if m["type"] == "anatomy"]
    assert len(anatomy) == 1 and anatomy[0]["activations"] > 0, "step 7 was measured"


@pytest.mark.parametrize("micro", [1, 4])
def test_accumulation_reads_three_times_per_micro_step(torch_mod, micro):
    client, model, opt, binding, _, _ = watched(torch_mod, step=5)
    opt.zero_grad()
    for _ in range(micro):
        (model(torch_mod.randn(4, 8)).sum() / micro).backward()
    opt.step()
    assert binding.calls == micro * MICRO_STEP_READS + 1  # + step end


def test_begins_carry_the_read_of_the_end_just_made_or_null(torch_mod):
    client, model, opt, binding, _, _ = watched(torch_mod, step=5)
    plain_step(torch_mod, model, opt)
    msgs = [m for m in queued(client) if m["type"] == "phase"]
    edges = [(m["name"], m["edge"], m["mem"] is not None) for m in msgs]
    assert edges == [
        ("zero_grad", "begin", False), ("zero_grad", "end", False),
        ("forward", "begin", False), ("forward", "end", True),
        ("loss", "begin", True), ("loss", "end", True),
        ("backward", "begin", True), ("backward", "end", True),
        ("step", "begin", False), ("step", "end", True),
    ]
    by = {(m["name"], m["edge"]): m for m in msgs}
    # The shared read is the same snapshot, in the same hook call.
    assert by[("loss", "begin")]["mem"] == by[("forward", "end")]["mem"]
    assert by[("backward", "begin")]["mem"] == by[("loss", "end")]["mem"]
    assert by[("forward", "end")]["mem"] == _cuda.mem_from_stats(load_fixture_stats())


def test_user_phases_and_marks_read_at_every_edge(torch_mod):
    client, _, _, binding, _, _ = watched(torch_mod, step=5)
    client.phase("eval", "begin", True)
    client.phase("eval", "end", True)
    client.mark("checkpoint")
    assert binding.calls == 3
    assert all(m["mem"] is not None for m in queued(client))


def test_uninitialised_cuda_reads_null_and_does_not_call_the_binding():
    stats, binding, cuda = counted_cuda()
    cuda.initialized = False
    assert stats.read_raw() is None and stats.read() is None
    assert binding.calls == 0
    cuda.initialized = True
    assert stats.read() == _cuda.mem_from_stats(load_fixture_stats())
    assert stats.read() is not None and cuda.init_checks == 3, "not asked once it said yes"


def test_raw_read_maps_to_the_same_mem_as_the_flat_stats():
    flat = load_fixture_stats("memory_stats_torch113_a100.json")
    stats, binding, _ = counted_cuda()
    binding.stats = nested_of(flat)
    assert _cuda.mem_from_raw(stats.read_raw()) == _cuda.mem_from_stats(flat)
    binding.stats = {}
    assert stats.read() is None, "an allocator never initialised returns {}"


def test_sampler_reads_nothing_while_edges_read_more_often():
    import threading
    import time

    stats, binding, _ = counted_cuda()
    client = _client.Client(make_config(sample_hz=20), cuda=stats, start=False)
    client._sampling.set()
    t = threading.Thread(target=client._run_sampler, daemon=True)
    t.start()
    try:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:  # an edge read every 2 ms: faster than 20 Hz
            client.last_read = time.monotonic()
            time.sleep(0.002)
        assert binding.calls == 0, "no sample while edges keep the curve fresh"
        deadline = time.monotonic() + 5
        while binding.calls < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # edges stopped: samples resume
        assert binding.calls >= 2
    finally:
        client._sampling.clear()
        client._stop.set()
        t.join(1)
    assert all(m["type"] == "sample" and m["mem"] is not None for m in queued(client))


def test_the_sampler_keeps_no_watch_alive():
    # The sampler asks the watch that owns the client (a weak reference)
    # between steps. It held the last one it asked through its wait, and
    # asked it again from there: a model the loop dropped (a k-fold loop's
    # last fold) stayed alive, on the device, with its watch.
    import gc
    import threading
    import time
    import weakref

    class Watch:
        def quiet_between(self, token):
            return False

    stats, binding, _ = counted_cuda()
    client = _client.Client(make_config(sample_hz=200), cuda=stats, start=False)
    watch = Watch()
    client.owner = weakref.ref(watch)
    gone = weakref.ref(watch)
    client._sampling.set()
    t = threading.Thread(target=client._run_sampler, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 5
        while binding.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # the sampler asked the watch
        assert binding.calls >= 3
        del watch
        deadline = time.monotonic() + 5
        while gone() is not None and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.01)
        assert gone() is None, "the sampler keeps a dropped watch alive"
    finally:
        client._sampling.clear()
        client._stop.set()
        t.join(1)


def test_edges_wake_the_sender_near_the_batch_and_not_before():
    # Client.put sets the wake event when it brings the queue to the batch
    # or one short of it (a switch queues two edges), never for fewer.
    client = _client.Client(make_config(), start=False, batch=6)
    client.put(None, "forward")
    client.put("forward", "loss")
    client.put(None, "step")
    assert len(client._queue) == 4 and not client._wake.is_set()
    client.put("step", None)  # from 4 queued: within one of the batch
    assert len(client._queue) == 5 and client._wake.is_set()
    closed = _client.Client(make_config(), start=False)
    closed._closed = True
    assert not closed.put("forward", "loss") and not closed._queue
    closed._closed = False  # reopened (bench/hook_toggle.py): queues again
    assert closed.put("forward", "loss") and len(closed._queue) == 2


def test_switch_queues_the_two_edges_edge_would_and_counts_what_it_drops():
    # Client.put with both names is edge(end) + edge(begin) in one call: the same
    # messages, one clock; a full queue drops the begin first and leaves a seq gap.
    raw = (1, 2, 3, 4, 0, 0)
    a = _client.Client(make_config(), start=False)
    b = _client.Client(make_config(), start=False)
    a.step = b.step = 5
    a.micro = b.micro = 2
    assert a.put("loss", "backward", raw)
    assert b.edge("loss", "end", raw) and b.edge("backward", "begin", raw)
    got, want = queued(a), queued(b)
    assert got[0]["t"] == got[1]["t"]
    for m in got + want:
        m.pop("t")
    assert got == want
    full = _client.Client(make_config(), start=False, queue_size=3)
    full.edge("forward", "begin", None)
    full.edge("forward", "end", raw)
    assert not full.put("loss", "backward", raw)
    assert [(m["name"], m["edge"], m["seq"]) for m in queued(full)] == [
        ("forward", "begin", 1), ("forward", "end", 2), ("loss", "end", 3)]
    assert full.dropped == 1
    assert not full.put("backward", "step", raw) and full.dropped == 3
    full.edge("step", "end", raw)
    assert full.dropped == 4
    assert full.stats()["created"] == 8  # seqs 3-6 went to the switches, 7 to this edge


def test_the_client_reads_through_the_bare_binding_once_cuda_has_answered():
    # Once CUDA is initialised a read is one C call: functools.partial of the
    # binding, no Python frame of ours; before that, the guarded read.
    import functools
    stats, binding, cuda = counted_cuda()
    cuda.initialized = False
    client = _client.Client(make_config(sample_hz=0), cuda=stats, start=False)
    assert client.reader() is None and binding.calls == 0
    assert not isinstance(client.reader, functools.partial)
    cuda.initialized = True
    assert client.reader() is binding.stats
    assert isinstance(client.reader, functools.partial)
    assert client.reader() is binding.stats and binding.calls == 2
    assert cuda.init_checks == 2, "not asked again once it said yes"


def test_a_read_is_queued_as_torchs_dict_and_kept_as_its_six_values():
    # The training thread queues the binding's dict untouched; the sender
    # makes it the mem object, and keeps only the six values for replay.
    stats, binding, _ = counted_cuda()
    client = _client.Client(make_config(sample_hz=0), cuda=stats, start=False)
    client.step = 5  # past the first steps' store: to the ring
    raw = client.reader()
    assert client.put("forward", None, raw)
    assert _messages.Edge._make(client._queue[-1]).raw is binding.stats
    want = _cuda.mem_from_stats(load_fixture_stats())
    assert queued(client)[-1]["mem"] == want
    client._drain()  # no monitor: kept for replay
    seq, kept = client._ring[-1]
    raw = _messages.Edge._make(kept[1]).raw
    assert raw == _cuda.compact(binding.stats) and type(raw) is tuple
    assert _cuda.mem_from_raw(raw) == want


def test_a_long_queue_holds_six_values_instead_of_dicts():
    # A sender held up (a slow monitor) must not pile up torch's ~11 KB dicts:
    # past HOLD_DICTS queued messages the training thread keeps the six values.
    stats, binding, _ = counted_cuda()
    client = _client.Client(make_config(sample_hz=0), cuda=stats, start=False)
    for _ in range(_client.HOLD_DICTS + 10):
        client.put("forward", None, binding.stats)
    kinds = [type(_messages.Edge._make(item).raw) for item in client._queue]
    assert kinds[:_client.HOLD_DICTS] == [dict] * _client.HOLD_DICTS
    assert kinds[_client.HOLD_DICTS:] == [tuple] * 10
    mems = {str(m["mem"]) for m in queued(client)}
    assert len(mems) == 1, "the same mem either way"
