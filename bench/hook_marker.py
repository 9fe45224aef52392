#!/usr/bin/env python3
"""Cost of one phase marker on the training thread.

Times Client.phase(): the allocator read, the message dict, the seq and the
enqueue, for both CudaStats read paths: torch's own memory_stats() (which
flattens and sorts the nested dict in Python) and memory_stats_as_nested_dict().
The C++ stats call is stubbed by one prebuilt nested dict made from the
realistic testdata/torch fixture, so its cost (the same for both paths) is
not counted. Then the sender's encoding cost per phase line. The sender
thread is not started; the queue is drained outside the timed region.

    PYTHONPATH=pyhook python3 bench/hook_marker.py
"""

import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

from vramscope import _client, _config, _cuda, _messages  # noqa: E402


def nested_stats():
    with open(os.path.join(ROOT, "testdata", "torch", "memory_stats_torch23_a100.json")) as f:
        flat = json.load(f)
    nested = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = nested
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return nested


def stub_cuda(nested, with_nested):
    """A CudaStats over a torch.cuda whose C++ stats call returns ``nested``."""
    import types

    def memory_stats(device=None):
        return torch_memory_stats(device)

    ns = types.SimpleNamespace(memory_stats=memory_stats, get_device_properties=lambda d: types.SimpleNamespace(name="stub", total_memory=0))
    if with_nested:
        ns.memory_stats_as_nested_dict = lambda device=None: nested
    return _cuda.CudaStats(types.SimpleNamespace(cuda=ns), 0)


def torch_memory_stats(device):
    raise RuntimeError("replaced in main")


def time_markers(cuda, batches, per_batch):
    config = _config.resolve(socket="/nonexistent", environ={})
    client = _client.Client(config, cuda=cuda, start=False)
    per_marker = []
    ns = time.perf_counter_ns
    for _ in range(batches):
        for _ in range(per_batch):
            t0 = ns()
            client.phase("forward", "begin")
            per_marker.append(ns() - t0)
        client._queue.clear()
    assert client.dropped == 0
    return per_marker


def report(name, samples):
    samples.sort()
    us = [x / 1000 for x in samples]
    print("%-34s median %6.2f us  p99 %6.2f us  (n=%d)"
          % (name, statistics.median(us), us[int(len(us) * 0.99)], len(us)))


def main(batches=100, per_batch=500):
    global torch_memory_stats
    nested = nested_stats()
    try:  # torch's real flattening code, fed the stub nested dict
        import torch.cuda.memory as tcm
        tcm.memory_stats_as_nested_dict = lambda device=None: nested
        torch_memory_stats = tcm.memory_stats
        flat_name = "marker, torch memory_stats()"
    except ImportError:
        flat = {}

        def rec(prefix, obj):
            for k, v in obj.items():
                if isinstance(v, dict):
                    rec(prefix + k + ".", v)
                else:
                    flat[prefix + k] = v
        rec("", nested)
        torch_memory_stats = lambda device=None: dict(flat)  # noqa: E731
        flat_name = "marker, flat dict copy (no torch)"
    report("marker, CPU (mem null)", time_markers(None, batches, per_batch))
    report(flat_name, time_markers(stub_cuda(nested, False), batches, per_batch))
    report("marker, memory_stats_as_nested_dict", time_markers(stub_cuda(nested, True),
                                                                batches, per_batch))
    client = _client.Client(_config.resolve(socket="/nonexistent", environ={}),
                            cuda=stub_cuda(nested, True), start=False)
    for _ in range(1000):
        client.phase("forward", "begin")
    msgs = [m for _, m in client._queue]
    enc = []
    ns = time.perf_counter_ns
    for _ in range(20):
        for m in msgs:
            t0 = ns()
            _messages.encode(m)
            enc.append(ns() - t0)
    report("sender: encode one phase line", enc)


if __name__ == "__main__":
    main()
