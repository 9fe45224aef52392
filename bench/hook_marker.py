#!/usr/bin/env python3
"""Cost of one phase marker on the training thread.

Times Client.phase(): the allocator read (stubbed with the realistic
memory_stats() dict from testdata/torch and the real mapping), the message
dict, the seq and the enqueue. The sender thread is not started, so the
queue is drained between batches outside the timed region.

    PYTHONPATH=pyhook python3 bench/hook_marker.py
"""

import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

from vramscope import _client, _config, _cuda  # noqa: E402


class StubCuda:
    def __init__(self):
        with open(os.path.join(ROOT, "testdata", "torch", "memory_stats_torch23_a100.json")) as f:
            self.stats = json.load(f)

    def read(self):
        return _cuda.mem_from_stats(dict(self.stats))  # memory_stats() returns a fresh dict

    def reset_peaks(self):
        pass

    def device_info(self):
        return None


def main(batches=200, per_batch=500):
    config = _config.resolve(socket="/nonexistent", environ={})
    client = _client.Client(config, cuda=StubCuda(), start=False)
    per_marker = []
    ns = time.perf_counter_ns
    for _ in range(batches):
        for _ in range(per_batch):
            t0 = ns()
            client.phase("forward", "begin")
            per_marker.append(ns() - t0)
        client._queue.clear()
    per_marker.sort()
    us = [x / 1000 for x in per_marker]
    print("markers: %d" % len(us))
    print("median: %.2f us" % statistics.median(us))
    print("p99:    %.2f us" % us[int(len(us) * 0.99)])
    print("dropped: %d (must be 0)" % client.dropped)


if __name__ == "__main__":
    main()
