#!/usr/bin/env python3
"""Cost of one phase edge on the training thread, allocator read included.

The allocator read goes through the real CudaStats path into
``torch._C._cuda_memoryStats``, faked by bench/fakecuda.py to cost
``--read-us`` (12.8 us: H100, torch 2.11) and return the real nested dict.
(This script used to stub the read with a prepared dict and reported ~3 us a
marker, which hid the 12.8 us every real read costs.) Times an end edge
(one read + the queued tuple), a begin edge (no read of its own), a user
phase edge through ``Client.phase`` (own read), and the sender's work per
phase line (message dict + encoding). For whole steps see
bench/cost_model.py.

    PYTHONPATH=pyhook python3 bench/hook_marker.py [--read-us 12.8]
"""

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fakecuda  # noqa: E402


def report(name, samples):
    samples.sort()
    us = [x / 1000 for x in samples]
    print("%-40s median %7.2f us  p99 %7.2f us  (n=%d)"
          % (name, statistics.median(us), us[int(len(us) * 0.99)], len(us)))


def timed(client, fn, batches, per_batch):
    ns = time.perf_counter_ns
    out = []
    for _ in range(batches):
        for _ in range(per_batch):
            t0 = ns()
            fn()
            out.append(ns() - t0)
        client._queue.clear()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--read-us", type=float, default=fakecuda.H100_READ_US)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--per-batch", type=int, default=200)
    args = ap.parse_args()
    import torch
    fake = fakecuda.FakeAllocator(args.read_us).install(torch)
    from vramscope import _client, _config, _cuda, _messages
    config = _config.resolve(socket="/nonexistent", environ={}, sample_hz=0)
    cuda = _cuda.detect(torch)
    client = _client.Client(config, cuda=cuda, start=False)
    b, n = args.batches, args.per_batch
    print("fake torch._C._cuda_memoryStats: %.1f us a call (busy wait); torch %s"
          % (args.read_us, torch.__version__))
    report("CPU run: edge, mem null", timed(
        client, lambda: client.edge("forward", "begin", None), b, n))
    report("end edge: read_raw() + edge()", timed(
        client, lambda: client.edge("forward", "end", client.read_raw()), b, n))
    client.reader()  # CUDA has answered: the reader is the bare binding now
    report("end edge, the hot path: reader() + put()", timed(
        client, lambda: client.put("forward", None, client.reader()), b, n))
    report("user phase edge: phase() (own read)", timed(
        client, lambda: client.phase("eval", "begin", True), b, n))
    report("torch.cuda.memory_stats_as_nested_dict", timed(
        client, lambda: torch.cuda.memory_stats_as_nested_dict(0), b, n))
    report("torch.cuda.memory_stats (flatten+sort)", timed(
        client, lambda: torch.cuda.memory_stats(0), b // 5 or 1, n))
    for _ in range(1000):
        client.put("forward", None, client.reader())
    items = [msg for _, msg in client._number(len(client._queue), 0)]
    out = []
    ns = time.perf_counter_ns
    for _ in range(20):
        for item in items:
            t0 = ns()
            _messages.encode(_messages.phase_message(item))
            out.append(ns() - t0)
    report("sender: message (the six values picked from torch's dict) + encode, one phase line", out)
    print("allocator calls: %d" % fake.reads)
    fake.uninstall()


if __name__ == "__main__":
    main()
