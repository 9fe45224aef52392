#!/usr/bin/env python3
"""What a census of the live tensors costs the training thread (docs/census.md,
"Cost"), at 10,000 and 100,000 live tensors.

A model and its optimizer state, then N small tensors (CPU) that a list in
the caller keeps alive, as a leak would, and a census taken the way the hook
takes one at a step's end. Prints the median of --runs censuses per size, its
three parts (listing the tensors, finding their holders, walking the
autograd graphs), the CPU time of the census's thread (less moved by other
processes than the wall time), the collector's object count (the listing
walks them all) and the load average, which on this shared box moves the
wall figures a lot.

    PYTHONPATH=pyhook python3 bench/census_cost.py [--sizes 10000 100000] [--runs 5]
"""

import argparse
import gc
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

from vramscope import _census  # noqa: E402


def one(torch, n, runs):
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters())
    loss = model(torch.randn(32, 256)).sum()
    loss.backward()
    opt.step()
    kept = [torch.full((4,), float(i)) for i in range(n)]  # noqa: F841 - what the census finds
    graphs = [model(torch.randn(2, 256)).sum() for _ in range(100)]  # noqa: F841 - 100 kept graphs
    gc.collect()
    parts = {"list": [], "holders": [], "graphs": [], "total": []}
    cpu = []
    last = None
    for _ in range(runs):
        c0 = time.thread_time()
        last = _census.take(torch, "cpu", model, opt, 1, "request", budget=60.0)["census"]
        cpu.append((time.thread_time() - c0) * 1000)
        for k in parts:
            parts[k].append(last["cost_ms"][k])
    med = {k: statistics.median(v) for k, v in parts.items()}
    names = sorted(h["name"] for h in last["holders"])
    print("%7d tensors (%d objects tracked): census %.1f ms wall, %.1f ms CPU of its thread, median of %d"
          " (wall: list %.1f, holders %.1f, graphs %.1f); complete %s; holders %s"
          % (last["tensors"], len(gc.get_objects()), med["total"], statistics.median(cpu), runs,
             med["list"], med["holders"], med["graphs"], last["complete"], names))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    import torch
    print("torch %s, python %s; load average %s" % (torch.__version__, sys.version.split()[0],
                                                    open("/proc/loadavg").read().split()[:3]))
    for n in args.sizes:
        one(torch, n, args.runs)


if __name__ == "__main__":
    main()
