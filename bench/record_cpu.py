#!/usr/bin/env python3
"""The monitor's CPU a training step: a watched loop of the cost model's
tiny MLP (the fake allocator's 12.8 us reads) streams to ``vramscope record
-o FILE.jsonl.gz`` for each binary given, and the monitor process's CPU
(utime + stime from /proc, every thread) over the run is divided by the
steps; the recording's size beside it. Binaries rotate over rounds.

    PYTHONPATH=pyhook python3 bench/record_cpu.py --bin OLD --bin bin/vramscope [--steps 20000]
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

import cost_model  # noqa: E402
import fakecuda  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of every thread of ``pid`` (/proc/PID/stat, fields 14 and 15)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, help="a vramscope binary (repeat)")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch
    import vramscope
    torch.set_num_threads(1)
    fakecuda.FakeAllocator(fakecuda.H100_READ_US).install(torch)
    model, opt, x, y = cost_model.training_of(torch, "tiny")
    ce = torch.nn.functional.cross_entropy
    rows = {b: [] for b in args.bin}
    work = tempfile.mkdtemp(prefix="vsreccpu")
    for r in range(args.rounds):
        order = args.bin[r % len(args.bin):] + args.bin[:r % len(args.bin)]
        for i, binary in enumerate(order):
            sock = os.path.join(work, "s%d%d.sock" % (r, i))
            out = os.path.join(work, "r%d%d.jsonl.gz" % (r, i))
            proc = subprocess.Popen([binary, "record", "-o", out, "--socket", sock],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while not os.path.exists(sock):
                time.sleep(0.02)
            w = vramscope.watch(model, opt, socket=sock)
            time.sleep(0.5)  # connected
            c0 = cpu_seconds(proc.pid)
            for _ in range(args.steps):
                opt.zero_grad()
                ce(model(x), y).backward()
                opt.step()
            w.remove()
            time.sleep(1.0)  # the last messages taken and written
            c1 = cpu_seconds(proc.pid)
            proc.send_signal(signal.SIGINT)
            proc.wait()
            rows[binary].append(((c1 - c0) * 1e6 / args.steps, os.path.getsize(out)))
            os.remove(out)
    os.rmdir(work)
    print("the monitor's CPU a step: tiny MLP, %.1f us reads (fake), %d steps a run, %d rounds, "
          "load %.2f" % (fakecuda.H100_READ_US, args.steps, args.rounds, os.getloadavg()[0]))
    for binary in args.bin:
        v = rows[binary]
        print("%-40s %7.1f us a step (runs %s)   recording %.2f MB" % (
            binary, statistics.median(a for a, _ in v), ", ".join("%.1f" % a for a, _ in v),
            statistics.median(b for _, b in v) / 1e6))


if __name__ == "__main__":
    main()
