#!/usr/bin/env python3
"""The training-thread cost of a measured step (saved-activation accounting,
the by-module split included) on a small transformer, against the
hook of another revision in the same process.

Every step is measured (activations_every=1). Modes run in rotated blocks
(no hook, the old hook, this hook); each block times --steps steps with
time.thread_time_ns and the median per-step time of the blocks is printed
with the added time against no hook. No monitor listens; torch.cuda is not
used (CPU torch).

    PYTHONPATH=pyhook python3 bench/measured_cost.py --old main [--blocks 10]
        [--steps 20] [--layers 4] [--width 32] [--seq 16]
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

from cost_model import old_package  # noqa: E402


def transformer(torch, layers, d, heads):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            y = self.ln1(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(256, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.head = nn.Linear(d, 256)

        def forward(self, x):
            h = self.emb(x)
            for b in self.blocks:
                h = b(h)
            return self.head(h)

    return Model()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision of the hook to compare with")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--seq", type=int, default=16)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    work = tempfile.mkdtemp()
    old_package(args.old, work)
    model = transformer(torch, args.layers, args.width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randint(0, 256, (4, args.seq))
    ce = torch.nn.functional.cross_entropy
    nmod = sum(1 for _ in model.modules())

    def loop(n):
        for _ in range(n):
            opt.zero_grad()
            ce(model(x).view(-1, 256), x.view(-1)).backward()
            opt.step()

    def hooked(pkg):
        mod = __import__(pkg, fromlist=["_client", "_config", "_watch"])
        cfg = mod._config.resolve(socket=os.path.join(work, "none.sock"), environ={},
                                  activations_every=1, sample_hz=0)

        def make():
            c = mod._client.Client(cfg, cuda=None, torch_version=torch.__version__)
            return mod._watch.Watcher(torch, c, model, opt, c.config), c
        return make

    modes = [("no hook", None), ("old hook, measured", hooked("vsold")),
             ("this hook, measured", hooked("vramscope"))]
    times = {name: [] for name, _ in modes}
    loop(5)
    for b in range(args.blocks):
        for name, make in modes[b % 3:] + modes[:b % 3]:
            w = c = None
            if make is not None:
                w, c = make()
                loop(3)  # steps 0-2, and one backward through the wrapper
            t0 = time.thread_time_ns()
            loop(args.steps)
            times[name].append((time.thread_time_ns() - t0) / args.steps / 1e3)
            if w is not None:
                w.remove()
                c.close("removed", timeout=1)
    base = statistics.median(times["no hook"])
    print("measured steps, %d-layer transformer (%d modules), torch %s, CPU, %d blocks x %d steps,"
          " load %.1f" % (args.layers, nmod, torch.__version__, args.blocks, args.steps,
                          os.getloadavg()[0]))
    for name, _ in modes:
        med = statistics.median(times[name])
        print("%-22s %9.1f us/step  %+8.1f us" % (name, med, med - base))


if __name__ == "__main__":
    main()
