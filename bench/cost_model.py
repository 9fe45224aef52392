#!/usr/bin/env python3
"""The hook's cost per training step under a GPU cost model, without a GPU.

Drives the real hook (real Watcher, Client and CudaStats) on a real CPU torch
model, with torch.cuda faked by bench/fakecuda.py so that each allocator
stats call (``torch._C._cuda_memoryStats``) costs ``--read-us`` of busy wait
(12.8 us: the H100/torch 2.11 median) and returns a dict of the real shape.

Modes run in one process, in blocks whose order rotates, so that machine
noise hits them alike; a fresh ``Watcher`` per block, whose first three
steps run untimed (a watch's first step reads at every phase, once per
watch; bench/host_cost.py skips them too), one client per mode (no monitor
listening unless --bin names a `vramscope` binary to record with). For each
mode it prints the median added wall time and training-thread
CPU time per step against the same loop without the hook, the spread of that
figure over blocks, and the allocator reads per step made on the training
thread. Loops: plain (zero_grad, forward, loss, backward, step), gradient
accumulation (--micro forward/backward passes per step) and measured steps
(saved-activation accounting on every step). Peers: torch.profiler with
profile_memory=True in the same loop, and the H100 figures of
_record_memory_history and the profiler from shared/recordings/h100.

    PYTHONPATH=pyhook python3 bench/cost_model.py [--read-us 12.8] [--blocks 24]
        [--steps 40] [--micro 4] [--old REV] [--bin bin/vramscope] [--sample-hz HZ] [--hf] [--floor]
        [--dynamic]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fakecuda  # noqa: E402
import null_hook  # noqa: E402
import shapes  # noqa: E402

# H100, torch 2.11, 8x2048 MLP + Adam, 3.34 ms synced step, same-process
# rotated blocks (shared/recordings/h100/README.md): the peers' cost per step.
H100_STEP_US = 3340.0
H100_RECORD_HISTORY_US = 0.192 * H100_STEP_US  # _record_memory_history(): +19.2 %
H100_PROFILER_US = 0.287 * H100_STEP_US  # profiler(profile_memory=True): +28.7 %
# input, width, batch, hidden layers; "h100mlp" is the 8x2048 MLP (for --device cuda)
# Steps each block runs before it is timed (a watch's first steps read at
# every phase; bench/host_cost.py skips as many).
WARM_STEPS = 3
SIZES = {"tiny": (256, 64, 16, 1), "wide": (512, 256, 32, 1), "h100mlp": (2048, 2048, 512, 7)}
# --dynamic's batch sizes, step after step, for a batch of 16 (scaled to the size's)
DYNAMIC = (16, 12, 20, 14, 18, 13)


def old_package(rev, into):
    """Extract pyhook/vramscope at ``rev`` as the importable package ``vsold``;
    ``rev`` may instead name a directory that holds such a package (a copy
    taken where there is no git history, as on a lent GPU machine)."""
    if os.path.isdir(rev):
        shutil.copytree(rev, os.path.join(into, "vsold"))
        sys.path.insert(0, into)
        return
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "pyhook/vramscope"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    os.rename(os.path.join(into, "pyhook", "vramscope"), os.path.join(into, "vsold"))
    sys.path.insert(0, into)


def start_monitor(binary, work, name):
    path = os.path.join(work, name + ".sock")
    proc = subprocess.Popen([binary, "record", "-o", os.path.join(work, name + ".jsonl"),
                             "--socket", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(path):
        time.sleep(0.02)
    return proc, path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--read-us", type=float, default=fakecuda.H100_READ_US,
                    help="cost of one allocator stats call (busy wait)")
    ap.add_argument("--reset-us", type=float, default=fakecuda.H100_RESET_US,
                    help="cost of one peak reset (busy wait; assumed, bench/fakecuda.py)")
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--hf", action="store_true",
                    help="the model shaped as a transformers model: keyword inputs, its loss "
                         "in a ModelOutput (bench/shapes.py)")
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps per block")
    ap.add_argument("--micro", type=int, default=4, help="micro-steps per accumulation step")
    ap.add_argument("--sample-hz", type=float, default=None,
                    help="sampler rate for the watch modes (default: the hook's default)")
    ap.add_argument("--old", help="also run the hook of this git revision")
    ap.add_argument("--bin", help="vramscope binary: clients stream to a real `record`")
    ap.add_argument("--no-profiler", action="store_true")
    ap.add_argument("--dynamic", action="store_true",
                    help="also a loop whose batch size changes at every step (dynamic batching: "
                         "%s times the size's batch over 16), unwatched and watched from step 0"
                         % (DYNAMIC,))
    ap.add_argument("--floor", action="store_true",
                    help="also time bench/null_hook.py: the watch's entries taking only the time, "
                         "one read and reset a step (the floor under any hook with these entries)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: the real allocator on a GPU, its reads counted, "
                         "_record_memory_history as a peer (--read-us is ignored)")
    with_allocator(ap.parse_args(), run)


def with_allocator(args, body):
    """``body(args, torch, fake, work, procs)`` with torch imported (the
    old hook as ``vsold`` beside it with ``args.old``) and its allocator
    the cost model's (``args.read_us``, ``args.reset_us``) or, with
    ``args.device`` "cuda", the real one counted; the monitors ``body``
    adds to ``procs`` are killed and ``work`` removed after it."""
    work = tempfile.mkdtemp(prefix="vscost", dir="/tmp")
    procs = []
    try:
        if args.old:
            old_package(args.old, work)
        sys.path.insert(0, os.path.join(ROOT, "pyhook"))
        import torch
        if getattr(args, "device", "cpu") == "cuda":  # the real allocator, its reads counted
            torch.zeros(1, device="cuda")  # initialise CUDA (the hook reads once it is)
            fake = fakecuda.CountingBinding().install(torch)
        else:
            torch.set_num_threads(1)
            fake = fakecuda.FakeAllocator(args.read_us, reset_us=args.reset_us).install(torch)
        body(args, torch, fake, work, procs)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


class Undo:
    """Calls ``undo`` at the end of its block."""

    def __init__(self, undo):
        self._undo = undo

    def __exit__(self, *exc):
        self._undo()


class HistoryOff:
    """Turns _record_memory_history off at the end of its block."""

    def __init__(self, torch):
        self._torch = torch

    def __exit__(self, *exc):
        self._torch.cuda.memory._record_memory_history(enabled=None)


def mlp_of(torch, size, dev="cpu"):
    """The MLP of ``SIZES[size]`` on ``dev``, its weights seeded."""
    inp, width, _, hidden = SIZES[size]
    if dev == "cuda":
        torch.manual_seed(0)
    else:
        # The CPU generator alone: on a CUDA build the fake allocator says
        # CUDA is initialised, and torch.manual_seed would seed CUDA's
        # generators, which were never made (IndexError).
        torch.random.default_generator.manual_seed(0)
    layers = [torch.nn.Linear(inp, width), torch.nn.ReLU()]
    for _ in range(hidden):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).to(dev)


def training_of(torch, size, dev="cpu"):
    """The model, optimizer and batch of ``SIZES[size]`` on ``dev``: the
    issue's 8x2048 MLP ("h100mlp") with Adam, the others with SGD and
    momentum; returns (model, opt, x, y)."""
    inp, _, batch, _ = SIZES[size]
    model = mlp_of(torch, size, dev)
    if size == "h100mlp":
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(batch, inp, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    return model, opt, x, y


def run(args, torch, fake, work, procs):
    packages = [("", "vramscope")]
    if args.old:
        packages.append(("old ", "vsold"))
    inp, width, batch, hidden = SIZES[args.size]
    dev = args.device
    model, opt, x, y = training_of(torch, args.size, dev)
    hf = args.hf
    if hf:  # model(input_ids=x, labels=y).loss: a transformers model's shape (no parameter added)
        model = shapes.lm_head(torch, model)
    ns, tns, ce = time.perf_counter_ns, time.thread_time_ns, torch.nn.functional.cross_entropy
    micro = args.micro
    # On a GPU each step is synced, as in the H100 table (README: "synced per step").
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    taken = [0]

    def stepping(batches):
        """The plain loop over ``batches`` in turn (the pick untimed)."""
        def loop(acc, n):
            for _ in range(n):
                xb, yb = batches[taken[0] % len(batches)]
                taken[0] += 1
                w0, c0 = ns(), tns()
                opt.zero_grad()
                loss = model(input_ids=xb, labels=yb).loss if hf else ce(model(xb), yb)
                loss.backward()
                opt.step()
                sync()
                acc.append((ns() - w0, tns() - c0))
        return loop

    plain = stepping([(x, y)])

    def accum(acc, n):
        for _ in range(n):
            w0, c0 = ns(), tns()
            opt.zero_grad()
            for _ in range(micro):
                loss = (model(input_ids=x, labels=y).loss if hf else ce(model(x), y)) / micro
                loss.backward()
            opt.step()
            sync()
            acc.append((ns() - w0, tns() - c0))

    dynamic = stepping([(torch.randn(b * batch // 16, inp, device=dev),
                         torch.randint(0, 10, (b * batch // 16,), device=dev)) for b in DYNAMIC])

    modes = []  # (name, loop, base name, factory of a watcher or a context)
    for tag, pkg in packages:
        mod = __import__(pkg, fromlist=["_client", "_config", "_cuda", "_watch"])
        C, CF, CU, W = mod._client, mod._config, mod._cuda, mod._watch

        def client(name, C=C, CF=CF, CU=CU, every_phase=False, start=3, **kw):
            if args.sample_hz is not None and "sample_hz" not in kw:
                kw["sample_hz"] = args.sample_hz
            sock = os.path.join(work, "none.sock")
            if args.bin:
                proc, sock = start_monitor(args.bin, work, name)
                procs.append(proc)
            cfg = CF.resolve(socket=sock, environ={}, **kw)

            def make(W=W):
                # A client per block: its sampler runs only in its own blocks.
                c = C.Client(cfg, cuda=CU.detect(torch, model), torch_version=torch.__version__)
                # past the always-measured first steps: a default plain step
                # (from 0: its first steps, untimed, measure, as in a run)
                c.step = start
                w = W.Watcher(torch, c, model, opt, c.config)
                if every_phase:  # the design that reads and resets at every phase
                    w.breakdown_always = True
                return w, c
            return make

        default = client(tag + "default")
        measured = client(tag + "measured", activations_every=1)
        quiet = client(tag + "nosampler", sample_hz=0) if not tag else None
        if quiet is not None:
            modes.append(("watch, sample_hz 0", plain, "plain", quiet))
            if hasattr(W.Watcher, "breakdown_always"):
                modes.append(("watch, every phase read+reset", plain, "plain",
                              client("everyphase", every_phase=True)))
        for name, loop, base, make in (("%swatch" % tag, plain, "plain", default),
                                       ("%swatch, measured" % tag, plain, "plain", measured),
                                       ("%swatch, accumulation" % tag, accum, "accumulation",
                                        default)):
            modes.append((name, loop, base, make))
        if args.dynamic:
            modes.append(("%swatch, dynamic batching" % tag, dynamic, "dynamic batching",
                          client(tag + "dynamic", start=0)))
    modes.insert(0, ("plain", plain, None, None))
    modes.insert(1, ("accumulation", accum, None, None))
    if args.dynamic:
        modes.insert(2, ("dynamic batching", dynamic, None, None))
    prof = hasattr(torch, "profiler") and hasattr(torch.profiler, "profile") \
        and not args.no_profiler
    if prof:
        modes.append(("torch.profiler(profile_memory)", plain, "plain", "profiler"))
    if dev == "cuda":
        modes.append(("_record_memory_history()", plain, "plain", "history"))
    if args.floor:
        modes.append(("floor (null_hook.py)", plain, "plain", "floor"))

    plain(([]), 30)
    accum([], 10)
    times = {m[0]: [] for m in modes}
    blocks = {m[0]: [] for m in modes}
    reads = dict.fromkeys(times, 0)
    resets = dict.fromkeys(times, 0)
    all_reads = dict.fromkeys(times, 0)
    secs = dict.fromkeys(times, 0.0)
    for b in range(args.blocks):
        r = b % len(modes)  # rotate: what ran before a block moves its time
        for name, loop, base, make in modes[r:] + modes[:r]:
            w = c = ctx = None
            if make == "profiler":
                acts = [torch.profiler.ProfilerActivity.CPU]
                if dev == "cuda":
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                ctx = torch.profiler.profile(activities=acts, profile_memory=True)
                ctx.__enter__()
            elif make == "history":
                torch.cuda.memory._record_memory_history()
                ctx = HistoryOff(torch)
            elif make == "floor":
                ctx = Undo(null_hook.install(torch, model, opt))
            elif make is not None:
                w, c = make()
            # Untimed, as bench/host_cost.py does: a watch's first step reads
            # at every phase (a breakdown step, once per watch), not a plain
            # step's cost; the peers' first steps set up their own state.
            loop([], WARM_STEPS)
            r0, a0, t0 = fake.training_reads, fake.reads, time.monotonic()
            z0 = getattr(fake, "resets", 0)
            acc = []
            loop(acc, args.steps)
            reads[name] += fake.training_reads - r0
            resets[name] += getattr(fake, "resets", 0) - z0
            all_reads[name] += fake.reads - a0
            secs[name] += time.monotonic() - t0
            if w is not None:
                w.remove()
                c.close("removed", timeout=1)
            if ctx is not None:
                ctx.__exit__(None, None, None)
            times[name] += acc
            blocks[name].append(statistics.median(a[1] for a in acc))  # training-thread CPU
            time.sleep(0.07)  # past the sender's 50 ms deadline: its work is done

    n = args.blocks * args.steps
    med = {k: (statistics.median(a[0] for a in v), statistics.median(a[1] for a in v))
           for k, v in times.items()}
    # The 10th percentile of training-thread CPU time: the step as it runs
    # when no other process interrupts it (on a shared box the median
    # carries the neighbours' load; the low percentile much less).
    p10 = {k: sorted(a[1] for a in v)[len(v) // 10] for k, v in times.items()}
    reader = ("%.1f us per allocator read, %.1f us per peak reset (busy waits, GIL held)"
              % (args.read_us, fake.reset_ns / 1e3)
              if dev == "cpu" else "REAL allocator on %s" % torch.cuda.get_device_name(0))
    print("cost model: %s; %s MLP %d-%d x%d-10 batch %d%s, %s, torch %s, %d torch threads; "
          "%d blocks x %d steps per mode; accumulation: %d micro-steps; load %.2f; %s"
          % (reader, args.size, inp, width, hidden + 1, batch,
             " shaped as a transformers model (keyword inputs, a ModelOutput)" if hf else "",
             type(opt).__name__,
             torch.__version__, torch.get_num_threads(), args.blocks, args.steps, micro,
             os.getloadavg()[0],
             "monitor: %s record" % args.bin if args.bin else "no monitor listening"))
    print("%-31s %9s %9s %9s %9s %9s %13s %6s %6s %9s" % (
        "mode", "step us", "+wall us", "+cpu us", "+cpu p10", "paired", "paired IQR",
        "reads", "resets", "sampler/s"))
    added = {}
    for name, _, base, _ in modes:
        wall, cpu = med[name]
        line = "%-31s %9.1f" % (name, wall / 1e3)
        if base is not None:
            bw, bc = med[base]
            # Paired: each block against the base's block of the same rotation
            # round (training-thread CPU, block medians): a drift of the box's
            # speed during the run moves both sides alike.
            diffs = sorted((a - b) / 1e3 for a, b in zip(blocks[name], blocks[base]))
            q = statistics.quantiles(diffs, n=4) if len(diffs) >= 2 else [diffs[0]] * 3
            added[name] = ((wall - bw) / 1e3, (cpu - bc) / 1e3, (p10[name] - p10[base]) / 1e3,
                           statistics.median(diffs))
            line += " %+9.1f %+9.1f %+9.1f %+9.1f %6.0f..%-6.0f" % (
                added[name][0], added[name][1], added[name][2], added[name][3], q[0], q[2])
        else:
            line += " %9s %9s %9s %9s %13s" % ("", "", "", "", "")
        sampler = (all_reads[name] - reads[name]) / secs[name] if secs[name] else 0
        line += " %6.2f %6.2f %9.1f" % (reads[name] / n, resets[name] / n, sampler)
        print(line)
    print("reads: allocator reads per optimizer step on the training thread "
          "(accumulation: per step of %d micro-steps)" % micro)
    # On a GPU the step synchronises and the training thread spins in the
    # wait: its CPU time is the step's wall time plus the spin's noise, so
    # the ratios there are of added wall time (medians).
    col = 1 if dev == "cpu" else 0
    for tag, _ in packages:
        name = "%swatch" % tag
        if name not in added:
            continue
        cost = added[name][col]
        if cost <= 0:  # a GPU's step-to-step noise can hide it: no ratio means anything
            print("%sratios: none; the plain step's added %s is %.1f us, inside the noise"
                  % (tag, "training-thread cpu" if dev == "cpu" else "wall time", cost))
            continue
        if dev == "cpu":
            print("%sratios (training-thread cpu per plain step, median %.1f us, paired %.1f us, "
                  "p10 %.1f us):" % (tag, cost, added[name][3], added[name][2]))
        else:
            print("%sratios (added wall time per plain step, median %.1f us, %.2f %% of the "
                  "step; training-thread cpu spins in the GPU's wait there):"
                  % (tag, cost, 100 * cost / (med["plain"][0] / 1e3)))
        print("  H100 _record_memory_history %.0f us/step: %.1fx; H100 profiler %.0f us/step: "
              "%.1fx" % (H100_RECORD_HISTORY_US, H100_RECORD_HISTORY_US / cost,
                         H100_PROFILER_US, H100_PROFILER_US / cost))
        if "torch.profiler(profile_memory)" in added:
            p = added["torch.profiler(profile_memory)"][1]
            pp = added["torch.profiler(profile_memory)"][2]
            print("  this box's torch.profiler(profile_memory) %.0f us/step: %.1fx (p10: %.0f us, "
                  "%.1fx)" % (p, p / cost, pp, pp / max(added[name][2], 1e-9)))
        m = added.get("%swatch, measured" % tag)
        if m and dev == "cpu":
            print("  measured step / plain step hook cost: %.2fx (p10: %.2fx)"
                  % (m[1] / cost, m[2] / max(added[name][2], 1e-9)))
        elif m:
            print("  measured step / plain step hook cost: %.2fx (added wall time, medians)"
                  % (m[0] / cost))
        dyn = added.get("%swatch, dynamic batching" % tag)
        if dyn:
            print("  dynamic batching: %.1f us per step (p10 %.1f), %.2fx the plain step's"
                  % (dyn[col], dyn[2], dyn[col] / cost))
        a = added.get("%swatch, accumulation" % tag)
        if a and dev == "cpu":
            print("  accumulation: %.1f us per step, %.1f us per micro-step (p10: %.1f, %.1f)"
                  % (a[1], a[1] / micro, a[2], a[2] / micro))
        elif a:
            print("  accumulation: %.1f us per step, %.1f us per micro-step (added wall time)"
                  % (a[0], a[0] / micro))
    fake.uninstall()


if __name__ == "__main__":
    main()
