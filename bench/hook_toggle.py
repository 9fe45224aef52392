#!/usr/bin/env python3
"""Where the hook's Python goes in a plain step: one Watcher and one Client,
blocks alternating with one part switched off, in the same process.

Complements bench/cost_model.py (which compares whole hooks with fresh
Watchers per block): here the same objects, threads and caches stay in
place and only one part changes between blocks, so the difference is that
part's cost in the step's own (cold) caches. Parts:

* ``logic``: the whole hook's work (``Watcher._active``; off = the torch
  registrations and wrappers alone);
* ``edges``: the eight ``Client.put`` calls (off = closed client);
* ``reads``: the four reads' Python (off = no reader; ``--read-us`` charges
  each read as in the cost model, 0 by default: Python only).

The sampler is not a part here: its thread cannot be stopped and restarted
between blocks; bench/cost_model.py has a ``sample_hz 0`` mode.

    PYTHONPATH=pyhook python3 bench/hook_toggle.py [--part logic] [--blocks 60]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

import fakecuda  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="logic", choices=["logic", "edges", "reads"])
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--read-us", type=float, default=0.0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the client warns that nothing listens

    import torch
    from vramscope import _client, _config, _cuda, _watch

    torch.set_num_threads(1)
    fakecuda.FakeAllocator(args.read_us).install(torch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    ce = torch.nn.functional.cross_entropy
    cfg = _config.resolve(socket=os.path.join(tempfile.mkdtemp(), "none.sock"), environ={})
    c = _client.Client(cfg, cuda=_cuda.detect(torch, model), torch_version=torch.__version__)
    c.step = 3  # past the always-measured first steps
    w = _watch.Watcher(torch, c, model, opt, c.config)
    reader = c.reader

    def switch(on):
        if args.part == "logic":
            w._active = on
        elif args.part == "edges":
            c._closed = not on
        else:
            c.reader = reader if on else None

    tns = time.thread_time_ns

    def block(acc):
        for _ in range(args.steps):
            c0 = tns()
            opt.zero_grad()
            ce(model(x), y).backward()
            opt.step()
            acc.append(tns() - c0)

    block([])
    on, off = [], []
    for _ in range(args.blocks):
        switch(False)
        block(off)
        switch(True)
        block(on)
    p10 = lambda v: sorted(v)[len(v) // 10]  # noqa: E731
    print("%s: +%.1f us median, +%.1f us p10 a plain step (step without it: %.1f us; "
          "%d blocks x %d steps, %.1f us a read, load %.2f)" % (
              args.part, (statistics.median(on) - statistics.median(off)) / 1e3,
              (p10(on) - p10(off)) / 1e3, statistics.median(off) / 1e3,
              args.blocks, args.steps, args.read_us, os.getloadavg()[0]))
    w.remove()
    c.close("done", timeout=1)


if __name__ == "__main__":
    main()
