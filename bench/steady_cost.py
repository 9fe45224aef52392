#!/usr/bin/env python3
"""The hook's cost per step in a long run, everything it does included:
the mean over thousands of steps of one watch, with the schedule's measured
and breakdown steps among them and the sender and sampler threads' work
counted, with and without a monitor listening.

bench/cost_model.py gives the median step of short blocks, each with a
fresh client, and waits between blocks for the sender to finish: the right
tool for the training thread's own path, but blind to work done off it.
The sender runs every few dozen steps and holds the GIL while it folds
peaks, encodes and sends; the training thread waits for it. Here each mode
runs one watch through a long block (--steps), with a real ``vramscope
record`` listening where --bin names one, so a block's mean carries its
share of that work. The cost model is cost_model.py's: a fake allocator
whose reads and resets busy-wait with the GIL held (bench/fakecuda.py).

Per block, per step: wall time and training-thread CPU time over the loop;
process CPU time (every thread of this process) over the loop and the
sender's drain after it. Blocks rotate over the modes; each added figure is
taken against the plain loop's block of the same round, and the median
over rounds is printed.

On a GPU (--device cuda) the allocator is the real one, its reads counted,
and the model is the issue's 8x2048 MLP with Adam. Each step is synced, as a
training loop that reads its loss every step is; a synchronising thread
spins, so the training thread's CPU is taken up to the sync (its own work:
launches and the hook), and the other threads' CPU (the sender's, the
sampler's, the driver's) beside it. --unsynced syncs once a block: the wall
time is then the loop's throughput, which the hook's CPU work only slows
where the CPU, not the GPU, sets the pace.

    PYTHONPATH=pyhook python3 bench/steady_cost.py [--bin bin/vramscope] [--old REV]
        [--rounds 6] [--steps 2000] [--read-us 12.8] [--device cuda [--unsynced]]
"""

import argparse
import gc
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cost_model  # noqa: E402
import fakecuda  # noqa: E402

WARM = 20  # untimed steps after each watch starts: its first steps are measured ones


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="vramscope binary: also run each hook with a real monitor")
    ap.add_argument("--old", help="also run the hook of this git revision")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=2000, help="steps per block")
    ap.add_argument("--read-us", type=float, default=fakecuda.H100_READ_US)
    ap.add_argument("--reset-us", type=float, default=fakecuda.H100_RESET_US)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: the real allocator and the 8x2048 MLP with Adam on a GPU")
    ap.add_argument("--unsynced", action="store_true",
                    help="with --device cuda: sync once a block, not every step")
    cost_model.with_allocator(ap.parse_args(), run)


def run(args, torch, fake, work, procs):
    ns, tns, pns = time.perf_counter_ns, time.thread_time_ns, time.process_time_ns
    cuda = args.device == "cuda"
    model, opt, x, y = cost_model.training_of(torch, "h100mlp" if cuda else "tiny", args.device)
    ce = torch.nn.functional.cross_entropy
    own_steps = []  # the training thread's CPU in each step, up to its sync (ns)

    def plain_loop(n):
        for _ in range(n):
            opt.zero_grad()
            ce(model(x), y).backward()
            opt.step()

    def synced_loop(n):
        sync, keep = torch.cuda.synchronize, own_steps.append
        for _ in range(n):
            c0 = tns()
            opt.zero_grad()
            ce(model(x), y).backward()
            opt.step()
            keep(tns() - c0)
            sync()

    def unsynced_loop(n):
        plain_loop(n)
        torch.cuda.synchronize()

    loop = plain_loop if not cuda else unsynced_loop if args.unsynced else synced_loop

    packages = [("", "vramscope")] + ([("old ", "vsold")] if args.old else [])
    modes = [("plain", None)]
    for tag, pkg in packages:
        mod = __import__(pkg, fromlist=["_client", "_config", "_cuda", "_watch"])
        monitors = [False] + ([True] if args.bin else [])
        for listening in monitors:
            sock = os.path.join(work, "none.sock")
            name = "%swatch%s" % (tag, ", monitor" if listening else "")
            if listening:
                proc, sock = cost_model.start_monitor(args.bin, work, name.replace(" ", "_")
                                                      .replace(",", ""))
                procs.append(proc)
            modes.append((name, (mod, mod._config.resolve(socket=sock, environ={}))))

    loop(50)
    rows = {name: [] for name, _ in modes}  # (wall, thread, process) us per step, per round
    reads = dict.fromkeys(rows, 0)
    spread = {name: [] for name, _ in modes}  # synced: own CPU's step median, p90, p99 (us)
    # The garbage collector's runs during each mode's timed loops, by
    # generation, and their time (any thread's, wherever they ran)
    collections = {name: [0, 0, 0, 0.0] for name, _ in modes}
    started, current = [0], [None]

    def on_gc(phase, info):
        if current[0] is None:
            return
        if phase == "start":
            started[0] = ns()
        else:
            c = collections[current[0]]
            c[info["generation"]] += 1
            c[3] += (ns() - started[0]) / 1e3
    gc.callbacks.append(on_gc)
    for r in range(args.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for name, hook in order:
            w = client = None
            if hook is not None:
                mod, cfg = hook
                client = mod._client.Client(cfg, cuda=mod._cuda.detect(torch, model),
                                            torch_version=torch.__version__)
                w = mod._watch.Watcher(torch, client, model, opt, client.config)
                loop(WARM)
                _drained(client)
            r0 = fake.training_reads
            own_steps.clear()
            w0, t0, p0 = ns(), tns(), pns()
            current[0] = name
            loop(args.steps)
            current[0] = None
            w1, t1 = ns(), tns()
            if hook is not None:
                _drained(client)
            p1, t2 = pns(), tns()
            reads[name] += fake.training_reads - r0
            n = args.steps * 1e3
            if cuda and not args.unsynced:  # own CPU up to the syncs; the other threads'
                rows[name].append(((w1 - w0) / n, sum(own_steps) / n, (p1 - p0 - (t2 - t0)) / n))
                own_steps.sort()
                k = len(own_steps)
                spread[name].append([own_steps[k // 2] / 1e3, own_steps[k * 9 // 10] / 1e3,
                                     own_steps[k * 99 // 100] / 1e3])
            else:
                rows[name].append(((w1 - w0) / n, (t1 - t0) / n, (p1 - p0) / n))
            if w is not None:
                w.remove()
                client.close("removed", timeout=2)

    if cuda:
        print("steady state: the REAL allocator on %s; 8x2048 MLP, Adam, batch 512, torch %s, "
              "%d torch threads; steps %s; %d rounds x %d steps per mode; load %.2f"
              % (torch.cuda.get_device_name(0), torch.__version__, torch.get_num_threads(),
                 "synced once a block" if args.unsynced else "each synced", args.rounds,
                 args.steps, os.getloadavg()[0]))
    else:
        print("steady state: %.1f us a read, %.1f us a reset (busy waits, GIL held); tiny MLP, "
              "SGD, torch %s, 1 torch thread; %d rounds x %d steps per mode; load %.2f"
              % (args.read_us, fake.reset_ns / 1e3, torch.__version__, args.rounds, args.steps,
                 os.getloadavg()[0]))
    gc.callbacks.remove(on_gc)
    synced = cuda and not args.unsynced
    print("%-26s %9s %10s %10s %11s %7s %18s %8s" % (
        "mode", "step us", "+wall us", "+own us" if synced else "+thread us",
        "+others us" if synced else "+process us", "reads", "gc runs /1000 steps", "gc us"))
    base = rows["plain"]
    steps = args.rounds * args.steps
    for name, _ in modes:
        v = rows[name]
        line = "%-26s %9.1f" % (name, statistics.median(a[0] for a in v))
        if name != "plain":
            line += " %+10.1f %+10.1f %+11.1f %7.2f" % tuple(
                [statistics.median(a[i] - b[i] for a, b in zip(v, base)) for i in range(3)]
                + [reads[name] / steps])
        else:
            line += " %10s %10s %11s %7s" % ("", "", "", "")
        c = collections[name]
        line += " %18s %8.2f" % ("%.1f/%.2f/%.2f" % tuple(n * 1000 / steps for n in c[:3]),
                                 c[3] / steps)
        print(line)
    if synced:
        print("own CPU a step, its distribution (block's median, p90 and p99, median over "
              "rounds; us):")
        for name, _ in modes:
            v = [statistics.median(b[i] for b in spread[name]) for i in range(3)]
            line = "  %-24s median %8.1f  p90 %8.1f  p99 %8.1f" % (name, *v)
            if name != "plain":
                line += "   +median %+7.1f" % statistics.median(
                    a[0] - b[0] for a, b in zip(spread[name], spread["plain"]))
            print(line)
    print("+: mean per step over a block, against the plain loop's block of the same round "
          "(median over rounds); %s; reads: allocator reads per step on the training thread; "
          "gc: the collector's runs of generations 0/1/2 in the timed loops, and their time a "
          "step" % ("own: the training thread's CPU up to each step's sync; others: every "
                    "other thread's CPU (the sender's drain after the loop included)" if synced
                    else "process: every thread, the sender's drain after the loop included"))


def _drained(client, timeout=2.0):
    """Wait until the sender has taken everything queued (the training
    thread is idle meanwhile)."""
    end = time.monotonic() + timeout
    client._wake.set()
    while client._queue and time.monotonic() < end:
        time.sleep(0.001)
    time.sleep(0.005)  # its last encode and send


if __name__ == "__main__":
    main()
