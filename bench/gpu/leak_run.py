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


def probe():
    """Who keeps the small CUDA tensors alive (lines start with "probe")."""
    import gc
    for o in gc.get_objects():
        if type(o) is torch.Tensor and o.is_cuda and o.nelement() * o.element_size() <= 512:
            refs = [type(r).__name__ + (":" + r.f_code.co_name if hasattr(r, "f_code") else "")
                    for r in gc.get_referrers(o)]
            print("probe tensor", tuple(o.shape), o.dtype, type(o.grad_fn).__name__, "referrers", refs)
    snap = getattr(torch.cuda.memory, "_snapshot", None)
    if snap is None:
        return
    for seg in snap()["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["size"] == 512:
                frames = [f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']} {f['name']}"
                          for f in b.get("frames", [])[:6]]
                print("probe block 512", frames)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--leak-from", type=int, default=20)
    ap.add_argument("--sleep", type=float, default=0.02)
    ap.add_argument("--no-hook", action="store_true")
    ap.add_argument("--probe", type=int, default=-1,
                    help="after this step, list the small CUDA tensors alive and their referrers, "
                         "and the allocator's live 512 B blocks with the stacks the history kept")
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
        if step == a.probe:
            probe()
        time.sleep(a.sleep)
    print("weights digest %.10e" % sum(p.double().sum().item() for p in model.parameters()))


if __name__ == "__main__":
    main()
