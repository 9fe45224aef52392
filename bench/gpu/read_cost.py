#!/usr/bin/env python3
"""The real cost of the two allocator calls the hook makes on every plain step.

Times ``torch._C._cuda_memoryStats(dev)`` (one read) and
``torch._C._cuda_resetPeakMemoryStats(dev)`` (one reset) on a real GPU, each
alone and back to back, after a warm-up, with live allocations of a small MLP
in the pool so the stats dict has its real size. bench/fakecuda.py's
H100_READ_US and H100_RESET_US are these figures.

    python3 bench/gpu/read_cost.py [--n 20000] [--json FILE]
"""
import argparse
import json
import statistics
import time

import torch


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t)
    out.sort()
    return {"median_us": statistics.median(out) / 1e3, "p10_us": out[n // 10] / 1e3,
            "p90_us": out[n * 9 // 10] / 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = torch.cuda.current_device()
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    model(torch.randn(512, 2048, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    read = lambda: torch._C._cuda_memoryStats(dev)  # noqa: E731
    reset = lambda: torch._C._cuda_resetPeakMemoryStats(dev)  # noqa: E731
    both = lambda: (read(), reset())  # noqa: E731
    for fn in (read, reset, both):
        timed(fn, 2000)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "read": timed(read, a.n), "reset": timed(reset, a.n), "read+reset": timed(both, a.n),
           "memory_allocated()": timed(torch.cuda.memory_allocated, a.n // 4),
           "stats keys": len(torch._C._cuda_memoryStats(dev))}
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
