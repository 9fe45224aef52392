#!/usr/bin/env python3
"""A k-fold loop on a real GPU: a new model and Adam each fold, the last dropped.

Each fold builds an MLP (--layers Linear(W, W) with GELU, then Linear(W, 10))
and Adam on the GPU, trains it --steps steps and keeps only its score, as a
cross-validation loop does: the names ``model`` and ``opt`` are rebound by
the next fold, so without a monitor the last fold's weights, gradients and
optimizer state are freed there. After every step the script prints the
user's own counters (memory_allocated, max_memory_allocated,
memory_reserved) and, at each fold's end, a checksum of its weights: lines
that start with "--", compared with and without the hook (run by
bench/gpu/checks.sh). A hook that keeps a dropped fold alive shows in them.

    python3 bench/gpu/kfold_run.py [--hook] [--folds 3] [--steps 6]
    vramscope run --record kfold.jsonl.gz -- python3 bench/gpu/kfold_run.py

--hook calls vramscope.watch() each fold and never removes it; under
``vramscope run`` the script calls nothing of vramscope's and auto-attach
finds each fold's model.
--device cpu smoke-tests the script where there is no GPU (no counters).
"""
import argparse
import gc
import weakref

import torch


def counters(dev):
    if dev.type != "cuda":
        return "cpu"
    c = torch.cuda
    return (f"allocated {c.memory_allocated(dev)} max_allocated {c.max_memory_allocated(dev)} "
            f"reserved {c.memory_reserved(dev)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hook", action="store_true")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.hook:
        import vramscope
    torch.manual_seed(0)
    x = torch.randn(a.batch, a.width, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    last = None  # a weak reference to the fold before's model
    for fold in range(a.folds):
        layers = []
        for _ in range(a.layers):
            layers += [torch.nn.Linear(a.width, a.width), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 10)).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        if a.hook:
            vramscope.watch(model, opt)
        for step in range(a.steps):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            kept = "alive" if last is not None and last() is not None else "freed"
            print(f"-- fold {fold} step {step} loss {loss.item():.6f} {counters(dev)} "
                  f"fold_before {kept}", flush=True)
        check = sum(p.detach().double().sum().item() for p in model.parameters())
        print(f"-- fold {fold} weights {check!r}", flush=True)
        last = weakref.ref(model)
    del model, opt
    gc.collect()
    print(f"-- end {counters(dev)} fold_before {'alive' if last() is not None else 'freed'}")


if __name__ == "__main__":
    main()
