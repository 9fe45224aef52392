#!/usr/bin/env python3
"""What the hook's sender thread does for one plain step, counted and timed
on one thread: the bytecode instructions of its drain (deterministic, as
bench/hook_ops.py counts the training thread's) and the drain's time, with
no monitor (messages kept for a later one) and with one connected (lines
encoded and sent).

The sender holds the GIL while it drains, so on a CPU-bound loop its work
is the training thread's wait (bench/steady_cost.py); on a GPU it mostly
runs while the training thread waits for the device. Here the queue of
32 plain steps of the cost model's loop (and their allocator reads) is
taken once, then drained again and again by the sender's own method on
this thread, nothing running beside it; "monitor" connects the client to
one end of a socketpair whose other end is emptied between drains.

    PYTHONPATH=pyhook python3 bench/sender_cost.py [--old REV] [--repeat 400]
"""

import argparse
import collections
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cost_model  # noqa: E402
import fakecuda  # noqa: E402
import shapes  # noqa: E402

STEPS = 32  # plain steps a drain takes: about the queue's batch of 256 messages


def drainer(torch, pkg, monitor):
    """A client of ``pkg`` (no thread of its own) holding the queue of
    STEPS plain steps, and the function that drains a fresh copy of it."""
    mod = __import__(pkg, fromlist=["_client", "_config", "_cuda", "_watch", "_owned"])
    model = shapes.mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    ce = torch.nn.functional.cross_entropy
    work = tempfile.mkdtemp(prefix="vssender", dir="/tmp")
    cfg = mod._config.resolve(socket=os.path.join(work, "none.sock"), environ={})
    client = mod._client.Client(cfg, cuda=mod._cuda.detect(torch, model),
                                torch_version=torch.__version__, start=False)
    watcher = mod._watch.Watcher(torch, client, model, opt, client.config)

    def step():
        opt.zero_grad()
        ce(model(x), y).backward()
        opt.step()

    for _ in range(10):  # past the first steps (breakdown and measured ones)
        step()
    client._drain()
    for _ in range(STEPS):
        step()
    items, reads = list(client._queue), list(client.peaks.pending)
    client._queue.clear()
    client.peaks.pending.clear()
    peer = None
    if monitor:
        mine, peer = socket.socketpair()
        mine.setblocking(False)
        peer.setblocking(False)
        client._sock, client._sock_id = mine, mod._owned.identity(mine.fileno())
        client.connects = 1

    def drain():
        client._queue.extend(items)
        client.peaks.pending.extend(reads)
        client._drain()
        if peer is not None:
            try:
                while peer.recv(1 << 20):
                    pass
            except BlockingIOError:
                pass

    def close():
        watcher.remove()
        client._sock = None
        client.close("done", timeout=0)
        shutil.rmtree(work, ignore_errors=True)
    return drain, close, len(items)


def count(drain):
    """Bytecode instructions of one drain, by function."""
    ops = collections.Counter()

    def tracer(frame, event, arg):
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            ops[(os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)] += 1
        return tracer
    sys.settrace(tracer)
    drain()
    sys.settrace(None)
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", help="also run the hook of this git revision")
    ap.add_argument("--repeat", type=int, default=400, help="timed drains per case")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the clients warn that nothing listens
    work = tempfile.mkdtemp(prefix="vssenderold", dir="/tmp")
    try:
        if args.old:
            cost_model.old_package(args.old, work)
        sys.path.insert(0, os.path.join(ROOT, "pyhook"))
        import torch
        torch.set_num_threads(1)
        fake = fakecuda.FakeAllocator(0).install(torch)  # the training thread's reads are not timed
        print("sender drain of %d plain steps on one thread (Python %d.%d, torch %s); load %.2f"
              % (STEPS, sys.version_info[0], sys.version_info[1], torch.__version__,
                 os.getloadavg()[0]))
        print("%-26s %14s %16s %12s" % ("case", "items a step", "opcodes a step",
                                         "us a step"))
        packages = [("", "vramscope")] + ([("old ", "vsold")] if args.old else [])
        for monitor in (False, True):
            for tag, pkg in packages:
                drain, close, n = drainer(torch, pkg, monitor)
                for _ in range(50):
                    drain()
                ops = count(drain)
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter_ns()
                    drain()
                    times.append(time.perf_counter_ns() - t0)
                close()
                name = "%s%s" % (tag, "monitor connected" if monitor else "no monitor")
                print("%-26s %14.1f %16.0f %12.2f" % (name, n / STEPS, sum(ops.values()) / STEPS,
                                                      statistics.median(times) / STEPS / 1e3))
        fake.uninstall()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
