#!/usr/bin/env python3
"""Training-step overhead of vramscope.watch() on a small CPU MLP.

Interleaves blocks (ABAB...) of the same loop: plain, watched (a monitor in a
subprocess drains the socket, as in real use), and under
torch.profiler.profile(profile_memory=True) as a peer. Then the cost of
activation accounting on measured vs unmeasured steps, and of one accounting
pass over a model with 1,000 parameter tensors.

    PYTHONPATH=pyhook python3 bench/step_overhead.py [--blocks 10] [--steps 200]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

import torch  # noqa: E402

from vramscope import _anatomy, _client, _config, _watch  # noqa: E402

DRAIN = ("import socket,sys,os\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n"
         "s.listen(1)\nprint('ready',flush=True)\nc,_=s.accept()\n"
         "while c.recv(1<<16): pass\n")


def make(width):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 10))
    return model, torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)


def loop(model, opt, x, y, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return (time.perf_counter() - t0) / steps


def overhead(args):
    model, opt = make(args.width)
    x, y = torch.randn(args.batch, 256), torch.randint(0, 10, (args.batch,))
    loop(model, opt, x, y, 50)  # warm up
    tmp = tempfile.mkdtemp(prefix="vs-bench-")
    path = os.path.join(tmp, "m.sock")
    drain = subprocess.Popen([sys.executable, "-c", DRAIN, path], stdout=subprocess.PIPE)
    drain.stdout.readline()
    client = _client.Client(_config.resolve(socket=path, environ={}))
    times = {"plain": [], "watch": [], "profiler": []}
    try:
        for _ in range(args.blocks):
            times["plain"].append(loop(model, opt, x, y, args.steps))
            w = _watch.Watcher(torch, client, model, opt, client.config)
            times["watch"].append(loop(model, opt, x, y, args.steps))
            w.remove()
            with torch.profiler.profile(profile_memory=True):
                times["profiler"].append(loop(model, opt, x, y, args.steps))
    finally:
        client.close("removed", timeout=1)
        drain.kill()
    base = statistics.median(times["plain"])
    print("step time, median of %d blocks x %d steps (MLP 256-%d-%d-10, batch %d, %d threads)"
          % (args.blocks, args.steps, args.width, args.width, args.batch,
             torch.get_num_threads()))
    for k, v in times.items():
        print("  %-9s %8.1f us  %+6.2f %%" % (k, statistics.median(v) * 1e6,
                                              (statistics.median(v) / base - 1) * 100))
    print("  hook messages created: %d, dropped %d, connects %d"
          % (client.stats()["created"], client.dropped, client.connects))


def accounting(args):
    model, opt = make(args.width)
    x, y = torch.randn(args.batch, 256), torch.randint(0, 10, (args.batch,))
    client = _client.Client(_config.resolve(socket="/nonexistent", environ={}), start=False)
    res = {}
    for name, every in (("measured (every step)", 1), ("unmeasured", 10 ** 9)):
        w = _watch.Watcher(torch, client, model, opt, client.config)
        w._config = _config.resolve(socket="/nonexistent", activations_every=every, environ={})
        client.step = 3  # past the always-measured first steps
        w._prepare(3)
        samples = []
        for _ in range(args.blocks):
            samples.append(loop(model, opt, x, y, args.steps))
            client._queue.clear()
        w.remove()
        res[name] = statistics.median(samples)
    base = res["unmeasured"]
    print("activation accounting (saved-tensor hooks + anatomy) per step:")
    for k, v in res.items():
        print("  %-22s %8.1f us  %+6.2f %%" % (k, v * 1e6, (v / base - 1) * 100))

    big = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(500))
    adam = torch.optim.Adam(big.parameters())
    for p in big.parameters():
        p.grad = torch.zeros_like(p)
    adam.step()
    n = len(list(big.parameters()))
    reps = []
    for _ in range(20):
        t0 = time.perf_counter()
        _anatomy.static_figures(torch, big, adam)
        reps.append(time.perf_counter() - t0)
    print("one accounting pass, %d parameter tensors + Adam state: %.2f ms (median of 20)"
          % (n, statistics.median(reps) * 1e3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    overhead(args)
    accounting(args)


if __name__ == "__main__":
    main()
