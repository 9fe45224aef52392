#!/usr/bin/env python3
"""Training-step overhead of vramscope.watch() on CPU MLPs.

For each model size (a tiny MLP whose step takes ~1 ms, and a wider one of
~10-20 ms), interleaves blocks of the same loop (ABAB...): plain; watched
with a monitor listening (a real `vramscope record` when --bin or
$VRAMSCOPE_BIN names one, else a Python reader draining the socket); and
watched with no monitor (the hook keeps its replay backlog). Prints the
median step time and the overhead in us and % per mode, with
torch.profiler.profile(profile_memory=True) around the same loop as a peer
(PyTorch's own memory tool). Then the cost of
activation accounting on measured vs unmeasured steps, and of one accounting
pass over a model with 1,000 parameter tensors. --pyhook DIR benchmarks
another copy of the package (for before/after comparisons in one run).

    PYTHONPATH=pyhook python3 bench/step_overhead.py [--blocks 15] [--steps 200]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyhook_dir():
    for i, a in enumerate(sys.argv):
        if a == "--pyhook" and i + 1 < len(sys.argv):
            return os.path.abspath(sys.argv[i + 1])
        if a.startswith("--pyhook="):
            return os.path.abspath(a.split("=", 1)[1])
    return os.path.join(ROOT, "pyhook")


sys.path.insert(0, _pyhook_dir())

import torch  # noqa: E402

from vramscope import _anatomy, _client, _config, _watch  # noqa: E402

DRAIN = ("import socket,sys,os\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n"
         "s.listen(1)\nprint('ready',flush=True)\nc,_=s.accept()\n"
         "while c.recv(1<<16): pass\n")
PROFILER = "torch.profiler"  # the peer: profile(profile_memory=True)
SIZES = {"tiny": (256, 64, 16), "wide": (512, 256, 32)}  # input, width, batch


def make(size):
    inp, width, _ = SIZES[size]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(inp, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 10))
    return model, torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)


def data(size):
    inp, _, batch = SIZES[size]
    return torch.randn(batch, inp), torch.randint(0, 10, (batch,))


def loop(model, opt, x, y, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return (time.perf_counter() - t0) / steps


class Monitor:
    """A listening monitor: the real binary when given, else a Python drain."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="vsb", dir="/tmp")
        self.path = os.path.join(self.dir, "m.sock")
        if binary:
            self.kind = "vramscope record"
            self.proc = subprocess.Popen(
                [binary, "record", "-o", os.path.join(self.dir, "r.jsonl"), "--socket",
                 self.path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while not os.path.exists(self.path):
                time.sleep(0.02)
        else:
            self.kind = "python drain"
            self.proc = subprocess.Popen([sys.executable, "-c", DRAIN, self.path],
                                         stdout=subprocess.PIPE)
            self.proc.stdout.readline()

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def overhead(args, size, monitor):
    model, opt = make(size)
    x, y = data(size)
    steps = args.steps if size == "tiny" else max(10, args.steps // 15)
    loop(model, opt, x, y, steps)  # warm up
    live = _client.Client(_config.resolve(socket=monitor.path, environ={}))
    alone = _client.Client(_config.resolve(socket=monitor.path + ".none", environ={}))
    modes = (("watch, monitor", live), ("watch, none", alone))
    times = {"plain": []}
    times.update((name, []) for name, _ in modes)
    peer = hasattr(torch, "profiler") and hasattr(torch.profiler, "profile")
    if peer:
        times[PROFILER] = []
    try:
        order = [("plain", None)] + list(modes) + ([(PROFILER, None)] if peer else [])
        for b in range(args.blocks):
            # Rotate the order: a block's position (what ran before it) moves
            # its time by more than the hook costs on a shared box.
            r = b % len(order)
            for name, client in order[r:] + order[:r]:
                w = client and _watch.Watcher(torch, client, model, opt, client.config)
                if name == PROFILER:
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                profile_memory=True):
                        times[name].append(loop(model, opt, x, y, steps))
                else:
                    times[name].append(loop(model, opt, x, y, steps))
                if w:
                    w.remove()
                # past the sender's deadline, so this block's messages are
                # handled before the next block starts
                time.sleep(getattr(_client, "FLUSH_INTERVAL", 0.01) + 0.02)
    finally:
        for _, client in modes:
            client.close("removed", timeout=1)
    base = statistics.median(times["plain"])
    inp, width, batch = SIZES[size]
    print("%s: MLP %d-%d-%d-10, batch %d; median of %d blocks x %d steps, %d torch threads"
          % (size, inp, width, width, batch, args.blocks, steps, torch.get_num_threads()))
    for k, v in times.items():
        med = statistics.median(v)
        print("  %-15s %9.1f us/step  %+7.1f us  %+6.2f %%"
              % (k, med * 1e6, (med - base) * 1e6, (med / base - 1) * 100))
    for name, client in modes:
        st = client.stats()
        print("  %-15s messages created %d, dropped %d, evicted %d, connects %d"
              % (name, st["created"], st["dropped"], st["evicted"], st["connects"]))


def accounting(args):
    model, opt = make("tiny")
    x, y = data("tiny")
    client = _client.Client(_config.resolve(socket="/nonexistent", environ={}), start=False)
    res = {}
    for name, every in (("measured (every step)", 1), ("unmeasured", 10 ** 9)):
        cfg = _config.resolve(socket="/nonexistent", activations_every=every, environ={})
        w = _watch.Watcher(torch, client, model, opt, cfg)
        client.step = 3  # past the always-measured first steps
        # The step bookkeeping moved to _schedule.Activations; older copies (--pyhook) have _prepare.
        prepare = getattr(w, "_prepare", None) or w._acts.prepare
        prepare(3)
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
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--steps", type=int, default=300, help="steps per block (tiny model)")
    ap.add_argument("--sizes", default="tiny,wide")
    ap.add_argument("--bin", default=os.environ.get("VRAMSCOPE_BIN"),
                    help="vramscope binary to listen with (default: a Python drain)")
    ap.add_argument("--pyhook", help="the pyhook directory to import vramscope from")
    ap.add_argument("--no-accounting", action="store_true")
    args = ap.parse_args()
    print("vramscope from %s; torch %s" % (os.path.dirname(_client.__file__), torch.__version__))
    for size in args.sizes.split(","):
        monitor = Monitor(args.bin)
        try:
            if size == args.sizes.split(",")[0]:
                print("monitor: %s" % monitor.kind)
            overhead(args, size, monitor)
        finally:
            monitor.close()
    if not args.no_accounting:
        accounting(args)


if __name__ == "__main__":
    main()
