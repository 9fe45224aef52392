#!/usr/bin/env python3
"""A leaking training loop on a real GPU, watched by the real hook.

An MLP W-W-W-10 with GELU and Adam; from --leak-from on, every step keeps
its hidden activation (``kept.append(h)``, still attached to its graph),
W x batch x 4 bytes a step. Run it under ``vramscope record -o DIR/x.jsonl.gz``:
the monitor's suspicion should bring a census naming ``kept`` and, on CUDA,
a bounded allocator-history snapshot written beside the recording.
--no-hook runs the same loop without vramscope, to compare the user's own
counters (printed once per step) with and without it.

    python3 bench/gpu/leak_run.py [--steps 80] [--width 2048] [--batch 1024] [--no-hook]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--leak-from", type=int, default=20)
    ap.add_argument("--sleep", type=float, default=0.02)
    ap.add_argument("--no-hook", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    w = a.width
    model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.GELU(), torch.nn.Linear(w, w),
                                torch.nn.GELU(), torch.nn.Linear(w, 10)).cuda()
    opt = torch.optim.Adam(model.parameters())
    if not a.no_hook:
        import vramscope
        vramscope.watch(model, opt)
    x = torch.randn(a.batch, w, device="cuda")
    y = torch.randint(0, 10, (a.batch,), device="cuda")
    kept = []
    for step in range(a.steps):
        opt.zero_grad()
        h = model[1](model[0](x))
        loss = torch.nn.functional.cross_entropy(model[4](model[3](model[2](h))), y)
        loss.backward()
        opt.step()
        if step >= a.leak_from:
            kept.append(h)  # the leak
        torch.cuda.synchronize()
        print("step %d allocated %d max_allocated %d reserved %d" % (
            step, torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(),
            torch.cuda.memory_reserved()), flush=True)
        time.sleep(a.sleep)
    print("weights digest %.10e" % sum(p.double().sum().item() for p in model.parameters()))


if __name__ == "__main__":
    main()
