#!/usr/bin/env python3
"""The hook's added training-thread CPU a step on a CPU run (docs/hook.md,
"Devices"): no hook, the hook with mem null, the hook reading the host's
RSS, and with --old REV the RSS-reading hook of that revision, all in one
process, in blocks whose order rotates; and, for each, the host reader's
read and reset alone, once a step, without the hook ("read alone").

Each block times --steps plain steps (past three always-read ones) with
time.thread_time_ns; the table gives the median of the blocks and the
paired median (each block against the no-hook block of its round). The
reads per step are counted by wrapping the reader. Last, the edge's
reader (read and reset) called back to back with timeit, for each hook,
rotated the same way.

    PYTHONPATH=pyhook python3 bench/host_cost.py [--old REV] [--blocks 30] [--steps 40]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import timeit
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

from cost_model import old_package  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", help="also run the RSS-reading hook of this git revision")
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # nothing listens
    work = tempfile.mkdtemp(prefix="vshost", dir="/tmp")
    if args.old:
        old_package(args.old, work)
    import torch
    torch.set_num_threads(1)
    packages = [("", "vramscope")] + ([("old ", "vsold")] if args.old else [])
    model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    ce = torch.nn.functional.cross_entropy
    counted = [0]

    def count(obj, name):
        """Count the calls of ``obj.name`` (an instance attribute over it)."""
        inner = getattr(obj, name)

        def counted_call():
            counted[0] += 1
            return inner()
        setattr(obj, name, counted_call)

    def counting(seam):
        if seam is None:
            return None
        if hasattr(seam, "_read_reset_keeping"):  # the edge's reader, and read_raw
            making = seam._read_reset_keeping

            def counted_making(keep):
                inner = making(keep)

                def counted_read():
                    counted[0] += 1
                    return inner()
                return counted_read
            seam._read_reset_keeping = counted_making
            count(seam, "read_raw")
        elif hasattr(seam, "_read_owned"):  # every read goes through it
            count(seam, "_read_owned")
        else:  # a hook before it: the reader and what the peak resets read
            count(seam, "read_raw")
            count(seam, "_read")
        return seam

    modes = [("no hook", None)]
    for tag, pkg in packages:
        mod = __import__(pkg, fromlist=["_client", "_config", "_devices", "_watch"])

        def make(host, mod=mod):
            cfg = mod._config.resolve(socket="/nonexistent/s.sock", environ={}, sample_hz=0,
                                      activations_every=0)
            seam = counting(mod._devices.HostStats()) if host else None
            c = mod._client.Client(cfg, cuda=seam, start=False)
            return mod._watch.Watcher(torch, c, model, opt, c.config), c, None

        def alone(mod=mod):
            read = mod._devices.HostStats().start_exact().read_reset

            def counted_read():
                counted[0] += 1
                return read()
            return None, None, counted_read
        if not tag:
            modes.append(("hook, mem null", lambda make=make: make(False)))
        modes.append(("%shook, host RSS" % tag, lambda make=make: make(True)))
        if mod._devices.HostStats().start_exact() is not None:
            modes.append(("%sread alone" % tag, alone))

    def loop(n, read=None):
        out = []
        for _ in range(n):
            t0 = time.thread_time_ns()
            opt.zero_grad()
            ce(model(x), y).backward()
            opt.step()
            if read is not None:
                read()
            out.append(time.thread_time_ns() - t0)
        return out

    loop(50)
    blocks = {name: [] for name, _ in modes}
    reads = dict.fromkeys(blocks, 0)
    for b in range(args.blocks):
        r = b % len(modes)
        for name, make in modes[r:] + modes[:r]:
            w = c = read = None
            if make is not None:
                w, c, read = make()
                loop(3, read)  # steps 0-2 read every phase
            counted[0] = 0
            times = loop(args.steps, read)
            reads[name] += counted[0]
            if w is not None:
                w.remove()
                c._closed = True
            blocks[name].append(statistics.median(times) / 1e3)
    base = blocks["no hook"]
    print("host RSS cost: tiny MLP 256-64-10 batch 16, SGD, torch %s, 1 torch thread; "
          "%d blocks x %d steps per mode, rotated; load %.2f (1-min average at the end)"
          % (torch.__version__, args.blocks, args.steps, os.getloadavg()[0]))
    print("%-22s %9s %9s %13s %11s" % ("mode", "step us", "+cpu us", "paired IQR", "reads/step"))
    for name, _ in modes:
        med = statistics.median(blocks[name])
        line = "%-22s %9.1f" % (name, med)
        if blocks[name] is not base:
            diffs = sorted(a - b for a, b in zip(blocks[name], base))
            q = statistics.quantiles(diffs, n=4)
            line += " %+9.1f %6.1f..%-6.1f" % (statistics.median(diffs), q[0], q[2])
        else:
            line += " %9s %13s" % ("", "")
        line += " %11.2f" % (reads[name] / (args.blocks * args.steps))
        print(line)
    one_read(packages)


def one_read(packages, rounds=7, number=20000):
    """Print the median over rounds of one read and reset at an edge (the
    best of three timeit runs a round), each hook's in turn."""
    readers = []
    for tag, pkg in packages:
        host = __import__(pkg, fromlist=["_devices"])._devices.HostStats()
        peaks = host.start_exact()
        if peaks is None:
            print("one read: no writable /proc/self/clear_refs here")
            return
        readers.append(("%shook" % tag, peaks.read_reset))
    times = {name: [] for name, _ in readers}
    for r in range(rounds):
        k = r % len(readers)
        for name, read in readers[k:] + readers[:k]:
            times[name].append(min(timeit.repeat(read, number=number, repeat=3)) / number * 1e6)
    print("one read and reset, back to back (timeit, median of %d rounds): %s; load %.2f"
          % (rounds, ", ".join("%s %.2f us" % (name, statistics.median(times[name]))
                               for name, _ in readers), os.getloadavg()[0]))


if __name__ == "__main__":
    main()
