"""Exact phase peaks by default, the user's own counters intact.

On the simulated H100 allocator (bench/fakecuda.py SimAllocator: the
seed-001 model's figures from testdata/h100/s001_stat_cuda.json) installed
under the real torch: the hook's reads are exact (never lower bounds) on
every step with default settings, plain steps read once, and the user's
prints are identical with and without the hook, on torch 1.13 and 2.x.
"""

import gc
import os
import subprocess
import sys

import pytest

from conftest import ROOT, make_config
from vramscope import _client, _cuda, _messages, _peaks, _watch

sys.path.insert(0, os.path.join(ROOT, "bench"))
import fakecuda  # noqa: E402

PINLOOP = os.path.join(ROOT, "pyhook", "tests", "pinloop.py")
PHASES = ("zero_grad", "forward", "loss", "backward", "step")
STEP1_PEAK = 4518008832  # every step from 1 on (shared/recordings/h100/README.md)
LEAK = 147 << 20  # the leak of the measured GPT-2 run, per step


def interpreters():
    # make test-py runs the whole suite under Debian's torch 1.13 and again
    # under the pinned torch 2.x venv, so each torch is this test's own.
    return [sys.executable]


def run_pinloop(python, hook):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "pyhook"))
    env.pop("VRAMSCOPE_SOCKET", None)
    args = [python, PINLOOP] + (["--hook"] if hook else [])
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


@pytest.mark.parametrize("python", interpreters())
def test_user_prints_identical_with_and_without_the_hook(python):
    """memory_allocated, max_memory_allocated, memory_reserved,
    max_memory_reserved, memory_stats() (digest), memory_stats_as_nested_dict()
    and memory_summary() after every phase, with a user reset_peak_memory_stats()
    and reset_max_memory_allocated() mid-run and after remove()."""
    plain, _ = run_pinloop(python, False)
    hooked, err = run_pinloop(python, True)
    stats_lines = [l for l in plain.splitlines() if " alloc " in l]
    assert len(stats_lines) == 1 + 8 * 5 + 2 + 2 + ("6 acc_reset" in plain)
    assert "2 reset " in plain and "5 reset_max" in plain
    assert hooked == plain
    # The hook did reset (1 at its start, 5 reads on steps 0-2, 1 on steps 3-7)
    # and went away at the user's reset after remove().
    resets = int(err.split("hook resets ")[1].split(",")[0])
    assert resets >= 1 + 3 * 5 + 5 + 2
    assert "patched after remove True" in err and "bindings restored True" in err


# ---- the hook's own figures --------------------------------------------------------------


class Box:
    step = 0


def build(torch, sim, box):
    """A real CPU model whose phases move the simulated allocator as the
    seed-001 model's did (the pinloop's Net and SimSGD)."""
    sys.path.insert(0, os.path.dirname(__file__))
    import pinloop
    step = [0]
    model = pinloop.Net(sim, step)
    opt = pinloop.SimSGD(model.parameters(), sim, step)
    return model, opt, step


def numbered(client):
    """The queue as the sender numbers it (Client._number: carries applied)."""
    out = []
    for _, msg in client._number(len(client._queue), 0):
        out.extend(_messages.phase_messages(msg) if type(msg) is tuple else [msg])
    return out


def run(torch, sim, steps, user_resets=(), every=100, install=True, skipped=(), evaluated=()):
    if install:
        sim.install(torch)
    try:
        cuda = _cuda.CudaStats(torch, 0)
        client = _client.Client(make_config(activations_every=every), cuda=cuda, start=False)
        model, opt, step = build(torch, sim, Box)
        w = _watch.Watcher(torch, client, model, opt, client.config)
        x = torch.randn(16, 8)
        for i in range(steps):
            step[0] = i
            model.zero_grad()
            out = model(x)
            if (i, "forward") in user_resets:
                torch.cuda.reset_peak_memory_stats()
            loss = out.pow(2).sum()
            sim.phase(i, "loss")
            if (i, "loss") in user_resets:
                torch.cuda.reset_peak_memory_stats()
            loss.backward()
            if (i, "backward") in user_resets:
                torch.cuda.reset_peak_memory_stats()
            if i not in skipped:  # a GradScaler that found inf gradients skips it
                opt.step()
            if i in evaluated:
                with torch.no_grad():
                    model(x)
        msgs = numbered(client)
        w.remove()
        client.close("removed", timeout=0)
        return client, msgs
    finally:
        if install:
            sim.uninstall()


def reads(msgs):
    """The resetting reads in order: (step, name, mem, msg); a begin edge
    repeating its end edge's read is not one."""
    out = []
    for m in msgs:
        if m["type"] == "phase" and m["mem"] is not None and m["edge"] == "end":
            out.append((m["step"], m["name"], m["mem"], m))
    return out


def truth(sim, leak_from=None):
    """Each phase's own peak, from the script alone (not from the hook)."""
    def peak(step, name):
        end, p, _ = sim.phases[min(step, max(sim.phases))][name]
        if leak_from is not None and step >= leak_from:
            p += (step - leak_from + (1 if name == "step" else 0)) * LEAK
        return p
    return peak


def check_exact(msgs, sim, leak_from=None):
    """Every read's max_allocated is the largest phase peak since the previous
    read (the phases it covers), to the byte: no read is a lower bound."""
    peak = truth(sim, leak_from)
    order = [(s, n) for s in range(100) for n in PHASES]
    prev = None
    for step, name, mem, _ in reads(msgs):
        idx = order.index((step, name))
        covered = order[(0 if prev is None else prev + 1):idx + 1]
        want = max(peak(s, n) for s, n in covered)
        assert mem["max_allocated"] == want, (step, name, mem, want)
        prev = idx
    return True


def test_phase_peaks_are_exact_on_every_step_by_default(torch_mod):
    sim = fakecuda.SimAllocator()
    client, msgs = run(torch_mod, sim, 10)
    assert client.exact and client.hello["hook"]["exact_peaks"] is True
    assert client.hello["hook"]["reset_peaks"] is False
    assert check_exact(msgs, sim)
    by_step = {}
    for step, name, mem, m in reads(msgs):
        by_step.setdefault(step, []).append((name, mem, m))
    # Steps 0-2 read every phase (zero_grad too); each later step once, at step end.
    for s in range(3):
        assert [n for n, _, _ in by_step[s]] == list(PHASES)
        assert all("span" not in m for _, _, m in by_step[s])
    for s in range(3, 10):
        (name, mem, m), = by_step[s]
        assert name == "step" and m["span"] == "step" and m["same_as"] == 2
        assert mem["max_allocated"] == STEP1_PEAK  # the step's exact peak
        assert mem["allocated"] == 1730501120  # held at the step's end
    # Every step from 1 peaks at step 1's figure (the README's fact), exactly.
    for s in range(1, 10):
        assert max(mem["max_allocated"] for _, mem, _ in by_step[s]) == STEP1_PEAK


def test_a_plain_step_that_skipped_its_update_is_read_where_it_ends(torch_mod):
    """A GradScaler's skip in a loop that zeroes first, on a plain step: no
    phase end of it is read and no step phase ends it, so its closing read
    is the next zero_grad's begin, which says so (closes). Its peak is the
    skipped step's own, and the step after it is read from there: each
    step's peak exact, neither covering the other's."""
    sim = fakecuda.SimAllocator()
    client, msgs = run(torch_mod, sim, 9, skipped={5})
    peak = truth(sim)
    begins = [m for m in msgs if m["type"] == "phase" and m["edge"] == "begin" and m.get("closes")]
    (b,) = begins
    assert (b["name"], b["step"], b["closes"]["step"]) == ("zero_grad", 6, 5)
    assert b["mem"]["max_allocated"] == max(peak(5, n) for n in PHASES[:4])
    assert b["mem"]["allocated"] == sim.phases[max(sim.phases)]["backward"][0]  # the gradients kept
    assert b["closes"].get("same_as") in (None, 2)
    ends = {m["step"]: m for _, _, _, m in reads(msgs) if m.get("span")}
    assert 5 not in ends  # no phase end of step 5 read
    six = [m for _, _, _, m in reads(msgs) if m["step"] == 6]
    assert max(m["mem"]["max_allocated"] for m in six) == max(peak(6, n) for n in PHASES)
    assert all(ends[s]["mem"]["max_allocated"] == STEP1_PEAK for s in (3, 4, 7, 8))


def test_an_evaluation_after_a_skipped_update_is_between_the_steps(torch_mod):
    """The step that skipped its update, then an evaluation (no_grad), then
    the next step's zero_grad: the evaluation is no micro-step of either,
    and the skipped step still ends where the next one begins."""
    sim = fakecuda.SimAllocator()
    client, msgs = run(torch_mod, sim, 9, skipped={5}, evaluated={5})
    phases = [m for m in msgs if m["type"] == "phase"]
    evals = [(m["step"], m["edge"]) for m in phases if m["name"] == "eval"]
    assert evals == [(5, "begin"), (5, "end")]
    (b,) = [m for m in phases if m.get("closes")]
    assert (b["name"], b["step"], b["closes"]["step"]) == ("zero_grad", 6, 5)
    assert max(m["micro"] for m in phases if m["step"] in (5, 6)) <= 1  # no micro-step 2 anywhere
    assert sorted({m["step"] for m in phases}) == list(range(9))
    assert [m["name"] for m in phases if m["step"] == 6 and m["edge"] == "begin"] \
        == ["zero_grad", "forward", "loss", "backward", "step"]


def fold_loop(torch, folds, keep_models=False):
    """A k-fold loop on the simulated allocator: for each ``(steps,
    skipped)`` of ``folds`` a new model, optimizer and watch on one
    connection, zero_grad first, the updates of the steps in ``skipped``
    skipped; each fold's model dropped after it unless ``keep_models``.
    Returns the connection's messages and the allocator."""
    sim = fakecuda.SimAllocator()
    sim.install(torch)
    try:
        cuda = _cuda.CudaStats(torch, 0)
        client = _client.Client(make_config(activations_every=100), cuda=cuda, start=False)
        x = torch.randn(16, 8)
        i, kept = 0, []
        for steps, skipped in folds:
            model, opt, box = build(torch, sim, Box)
            w = _watch.Watcher(torch, client, model, opt, client.config)
            if keep_models:
                kept.append((model, w))
            for _ in range(steps):
                box[0] = i
                model.zero_grad()
                loss = model(x).pow(2).sum()
                sim.phase(i, "loss")
                loss.backward()
                if i not in skipped:
                    opt.step()
                i += 1
            del model, opt, loss, w
        msgs = numbered(client)
        client.close("removed", timeout=0)
        return msgs, sim
    finally:
        sim.uninstall()


def test_a_watch_whose_first_update_is_skipped_still_learns_the_loop(torch_mod):
    """A second watch on the same connection (a k-fold loop's next fold)
    whose first step skipped its update: the loop's shape (zero_grad first)
    is still learnt from the step after, so a later skip is read where it
    ends as in any watch, not left unread."""
    msgs, _ = fold_loop(torch_mod, ((4, ()), (10, (4, 9))))  # the second fold's first step skips
    closes = [(m["step"], m["closes"]["step"]) for m in msgs if m["type"] == "phase" and m.get("closes")]
    assert closes == [(10, 9)]


@pytest.mark.parametrize("kept", [False, True], ids=["model dropped", "model kept"])
def test_a_watch_that_ends_with_a_skipped_step_ends_that_step(torch_mod, kept):
    """A k-fold loop's next fold after the last step of a fold skipped its
    update: the fold's model is dropped (its watch goes) or still held, and
    a new watch starts on the connection. The skipped step ends there,
    not joined by the next watch's phases; the next watch's first zero_grad
    carries its read, whose peak is the step's and whose allocated is not
    what it held (held: false)."""
    msgs, sim = fold_loop(torch_mod, ((6, (5,)), (4, ())), keep_models=kept)
    phases = [m for m in msgs if m["type"] == "phase"]
    assert sorted({m["step"] for m in phases}) == list(range(10))
    assert all(m["micro"] == 0 for m in phases if m["name"] == "forward")  # no step joined another
    (b,) = [m for m in phases if m.get("closes")]
    assert (b["name"], b["step"], b["closes"]) == ("zero_grad", 6, {"step": 5, "held": False})
    assert b["mem"]["max_allocated"] == max(truth(sim)(5, n) for n in PHASES[:4])


def test_a_user_reset_mid_phase_leaves_the_hooks_interval_whole(torch_mod):
    sim = fakecuda.SimAllocator()
    # Step 1 reads every phase, steps 4 and 5 once at their end: in step 4
    # the user resets after backward, so the step's peak (backward's) lies
    # before the reset, inside the interval the step's one read closes.
    client, msgs = run(torch_mod, sim, 7,
                       user_resets={(1, "loss"), (4, "backward"), (5, "forward")})
    assert check_exact(msgs, sim)
    plain = [m for _, _, _, m in reads(msgs) if m["step"] >= 3]
    assert all(m.get("same_as") == 2 for m in plain)


def test_a_step_that_moves_gets_its_phases_read_next(torch_mod):
    sim = fakecuda.SimAllocator(leak_from=5, leak=LEAK)
    client, msgs = run(torch_mod, sim, 9)
    assert check_exact(msgs, sim, leak_from=5)
    spans = {m["step"]: m for _, _, _, m in reads(msgs) if m.get("span")}
    assert spans[4]["same_as"] == 2
    assert "same_as" not in spans[5]  # moved by 147 MiB: no same phases
    steps = {}
    for step, name, _, _ in reads(msgs):
        steps.setdefault(step, []).append(name)
    assert steps[6] == ["forward", "loss", "backward", "step"]  # a breakdown after the move
    assert 6 not in spans
    # Step 7 moved again against step 6 (the leak goes on): one read, no same_as.
    assert "same_as" not in spans[7] and steps[8] == ["forward", "loss", "backward", "step"]


def test_breakdown_steps_fall_halfway_between_measured_steps(torch_mod):
    # A measured step reads once, as a plain step; the phases are read one
    # step in activations_every, halfway between two measured steps.
    sim = fakecuda.SimAllocator()
    _, msgs = run(torch_mod, sim, 11, every=4)
    steps = {}
    for step, name, _, _ in reads(msgs):
        steps.setdefault(step, []).append(name)
    assert steps[6] == steps[10] == ["forward", "loss", "backward", "step"]
    assert steps[3] == steps[4] == steps[5] == steps[8] == ["step"]
    measured = [m["step"] for m in msgs if m["type"] == "anatomy"
                and m["activations_source"] == "measured"]
    assert measured == [0, 1, 2, 4, 8]
    same = {m["step"]: m.get("same_as") for m in msgs
            if m["type"] == "phase" and m.get("span") == "step"}
    assert same[4] == same[5] == 2 and same[8] == 6  # the last breakdown step


def test_sampler_and_oom_reads_reset_nothing(torch_mod):
    sim = fakecuda.SimAllocator().install(torch_mod)
    try:
        client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch_mod, 0), start=False)
        before = sim.resets
        client.read_plain()
        client.read_mem()
        assert sim.resets == before
        client.mark("m")  # a mark's read resets, as a phase edge's does
        assert sim.resets == before + 1
        client.close("removed", timeout=0)
    finally:
        sim.uninstall()


def _read(alloc, reserved, pool=None):
    """A binding's dict of the shape that matters to the fold: two stats,
    their pools, and a counter without a peak."""
    stats = {"allocated_bytes": {"all": {"current": 0, "peak": alloc},
                                 "large_pool": {"current": 0, "peak": alloc - 1}},
             "reserved_bytes": {"all": {"current": 0, "peak": reserved}},
             "num_ooms": 0}
    if pool is not None:
        stats["reserved_bytes"]["small_pool"] = {"current": 0, "peak": pool}
    return stats


@pytest.mark.parametrize("batch", [
    [_read(5, 9), _read(7, 8), {}, _read(6, 11)],  # one shape: folded in one pass
    [_read(5, 9), _read(7, 8, pool=40), {}, _read(6, 11, pool=3),
     {"allocated_bytes": {"all": None}}],  # paths some reads lack: read by read
])
def test_the_sender_folds_each_peak_the_largest_of_the_reads_that_have_it(batch):
    peaks = _peaks.DevicePeaks(lambda device: None, lambda device: None, 0)
    peaks.folded[("reserved_bytes", "all")] = 10  # from an earlier round
    peaks.pending.extend(batch[:1])
    peaks.fold()  # the first read names the paths
    peaks.pending.extend(batch[1:])
    peaks.fold()
    assert not peaks.pending
    want = {("allocated_bytes", "all"): 7, ("allocated_bytes", "large_pool"): 6,
            ("reserved_bytes", "all"): 11}
    assert peaks.folded == want


def test_a_fake_read_leaves_the_collector_what_a_real_one_does(torch_mod):
    # The young generation's count is what the next test weighs: a fake read
    # must make and keep tracked as many objects as torch 2.11's real one on
    # an H200 (bench/fakecuda.py, READ_GC_OBJECTS and READ_TRACKED).
    torch = torch_mod
    fake = fakecuda.FakeAllocator(read_us=0.001, reset_us=0).install(torch)
    try:
        first, second = torch._C._cuda_memoryStats(0), torch._C._cuda_memoryStats(0)
        assert len(second) == 17 and second is not first
        assert fakecuda.gc_load(second) == (fakecuda.READ_GC_OBJECTS, fakecuda.READ_TRACKED)
    finally:
        fake.uninstall()


def test_a_plain_steps_reads_are_let_go_before_they_fill_the_young_generation(torch_mod):
    # torch builds a new nested dict on every read (about 40 dicts); the hook
    # keeps each until the sender's round. The sender must be woken before
    # the reads kept since its last round fill Python's young generation,
    # whose collection would promote them (docs/hook.md, "The garbage
    # collector").
    torch = torch_mod
    fake = fakecuda.FakeAllocator(read_us=0.001, reset_us=0).install(torch)  # a new dict a read
    try:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                    torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        client = _client.Client(make_config(sample_hz=0), cuda=_cuda.detect(torch, model),
                                start=False)
        watcher = _watch.Watcher(torch, client, model, opt, client.config)
        x = torch.randn(4, 8)

        def step():
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        for _ in range(5):  # past the first steps, which read every phase
            step()
        client._drain()
        client._wake.clear()
        gc.collect()
        gc.disable()
        try:
            made, steps = gc.get_count()[0], 0
            while not client._wake.is_set() and steps < 100:
                step()
                steps += 1
            made = gc.get_count()[0] - made
        finally:
            gc.enable()
        assert steps > 1, "a round every step would wake the sender too often"
        assert made < gc.get_threshold()[0], (steps, made)
        watcher.remove()
        client.close("done", timeout=0)
    finally:
        fake.uninstall()


def test_remove_undoes_the_patches(torch_mod):
    sim = fakecuda.SimAllocator().install(torch_mod)
    try:
        client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch_mod, 0), start=False)
        c = torch_mod._C
        assert c._cuda_memoryStats is not sim and _peaks.installed(torch_mod)
        assert c._cuda_memoryStats.__vramscope_original__ is sim
        # Nothing the hook reset away is above the live peak: undone at once.
        client.close("removed", timeout=0)
        assert c._cuda_memoryStats is sim and c._cuda_resetPeakMemoryStats == sim.reset_peaks
        assert not _peaks.installed(torch_mod)
    finally:
        sim.uninstall()


def test_cpu_torch_without_the_bindings_is_not_exact(torch_mod):
    import types
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        memory_stats=lambda d: {}, get_device_properties=None))
    cuda = _cuda.CudaStats(fake, 0)
    assert cuda.start_exact() is None


def test_reset_peaks_is_retired_with_one_warning():
    with pytest.warns(FutureWarning, match="reset_peaks is retired"):
        c = make_config(reset_peaks=True)
    assert c.reset_peaks is False
    from vramscope import _config
    with pytest.warns(FutureWarning):
        c = _config.resolve(environ={"VRAMSCOPE_RESET_PEAKS": "1"})
    assert c.reset_peaks is False


def test_accumulation_steps_read_once(torch_mod):
    sim = fakecuda.SimAllocator().install(torch_mod)
    try:
        client = _client.Client(make_config(), cuda=_cuda.CudaStats(torch_mod, 0), start=False)
        model, opt, step = build(torch_mod, sim, Box)
        w = _watch.Watcher(torch_mod, client, model, opt, client.config)
        x = torch_mod.randn(16, 8)
        counts = []
        for i in range(6):
            step[0] = min(i, 1)  # the simulated figures of step 1, 4 micro-steps each
            r0, z0 = sim.reads, sim.resets
            model.zero_grad()
            for _ in range(4):
                model(x).pow(2).sum().backward()
            opt.step()
            counts.append((sim.reads - r0, sim.resets - z0))
        w.remove()
        client.close("removed", timeout=0)
    finally:
        sim.uninstall()
    assert counts[:3] == [(1 + 3 * 4 + 1, 1 + 3 * 4 + 1)] * 3  # zero_grad, 3 per micro, step
    assert counts[3:] == [(1, 1)] * 3


def test_messages_match_the_shared_fixture(torch_mod):
    """The exact-peaks hello and a plain step's edge have the shape of
    testdata/protocol/additions.jsonl's last lines (which ipc/ decodes)."""
    import json
    from test_schema import check, shape_of
    with open(os.path.join(ROOT, "testdata", "protocol", "additions.jsonl")) as f:
        fixture = [json.loads(line) for line in f if line.strip()]
    hello_fx = [m for m in fixture if m["type"] == "hello"][-1]
    span_fx = [m for m in fixture if m.get("span")]
    sim = fakecuda.SimAllocator()
    client, msgs = run(torch_mod, sim, 5)
    assert set(client.hello["hook"]) == set(hello_fx["hook"])
    plain = [m for m in msgs if m.get("span")]
    assert plain and all(m["same_as"] == 2 for m in plain)
    check(plain[0], shape_of(span_fx), {"input", "model"}, "phase")


def test_a_second_session_reads_beneath_the_first_ones_patches(torch_mod):
    """watch(), remove(), watch() again on one allocator (clients.jsonl's
    blocks): the first client's patches stay while they hide a peak, and the
    second client must read torch's own binding, not the user's view."""
    sim = fakecuda.SimAllocator()
    sim.install(torch_mod)
    try:
        _, first = run(torch_mod, sim, 4, install=False)
        assert _peaks.installed(torch_mod)  # step 1's peak is still hidden from torch
        # The second session's steps run lower: the seed-001 model at steps
        # 0 and 1 again would not do, so its script is step 1 minus 1 GiB.
        one = {n: (e - (1 << 30), p - (1 << 30), r) for n, (e, p, r) in sim.phases[1].items()}
        sim.phases = {0: one, 1: one}
        sim._free_to(sim.allocated - (1 << 30))
        client, msgs = run(torch_mod, sim, 6, install=False)
        assert check_exact(msgs, sim)
    finally:
        sim.uninstall()


from test_e2e import start, stop_ok  # noqa: E402


def test_the_monitor_takes_the_exact_peaks_stream(vs_bin, workdir, recorders):
    """The pin loop's hook (simulated H100, 8 steps) into a real ``vramscope
    record``: no bad message; hello says exact_peaks; steps 3-7 are plain,
    each one read with span "step" and same_as 2 at step 1's peak."""
    out, sock = os.path.join(workdir, "run.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "pyhook"))
    proc = subprocess.run([sys.executable, PINLOOP, "--hook", "--socket", sock], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec.wait_for(lambda ms: any(m["type"] == "goodbye" for m in ms), "the hook's goodbye")
    summary = stop_ok(rec)
    assert " 8 steps, 0 lost" in summary, summary
    msgs = rec.messages()
    hello = [m for m in msgs if m["type"] == "hello"][0]
    assert hello["hook"]["exact_peaks"] is True
    spans = [m for m in msgs if m.get("span")]
    assert [m["step"] for m in spans] == [3, 4, 5, 6, 7]
    assert all(m["same_as"] == 2 and m["mem"]["max_allocated"] == STEP1_PEAK for m in spans)
