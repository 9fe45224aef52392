#!/usr/bin/env python3
"""A real CUDA out-of-memory error, with what the allocator said at that instant.

An MLP of --layers Linear(W, W)+GELU with Adam whose batch doubles every
--every steps, under torch.cuda.set_per_process_memory_fraction(--fraction)
so the card's limit is reached in seconds. With --hook the real vramscope
hook watches it (record it with `vramscope record`) and the error is
re-raised, so the process dies of it as a real run does. At the error the
script saves the exception text, ``memory_stats()`` and, per segment of
``memory_snapshot()``, its size, allocated bytes and largest free block:
the ground truth an OOM breakdown must add up to. --snapshot also dumps a
_record_memory_history snapshot taken at the error (history on from the
first step, --max-entries capped).

    python3 bench/gpu/oom_capture.py --json oom.json [--hook] [--snapshot oom.pickle]
"""
import argparse
import json
import sys
import traceback

import torch


def segments_summary(segments):
    out = []
    for s in segments:
        free = [b["size"] for b in s["blocks"] if b["state"] == "inactive"]
        out.append({"address": s["address"], "total_size": s["total_size"],
                    "allocated_size": s["allocated_size"], "segment_type": s["segment_type"],
                    "blocks": len(s["blocks"]), "largest_free": max(free, default=0),
                    "free_total": sum(free)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--hook", action="store_true")
    ap.add_argument("--snapshot")
    ap.add_argument("--fraction", type=float, default=0.03)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--max-entries", type=int, default=4000)
    a = ap.parse_args()
    torch.cuda.set_per_process_memory_fraction(a.fraction)
    torch.manual_seed(0)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 10)).cuda()
    opt = torch.optim.Adam(model.parameters())
    if a.hook:
        import vramscope
        vramscope.watch(model, opt)
    if a.snapshot:
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, stacks="python")
    rec = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "fraction": a.fraction, "total": torch.cuda.get_device_properties(0).total_memory,
           "params": sum(p.numel() for p in model.parameters()), "steps": []}
    batch, step = a.batch, 0
    try:
        while True:
            if step and step % a.every == 0:
                batch *= 2
            x = torch.randn(batch, a.width, device="cuda")
            y = torch.randint(0, 10, (batch,), device="cuda")
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            rec["steps"].append({"step": step, "batch": batch,
                                 "max_allocated": torch.cuda.max_memory_allocated()})
            step += 1
    except torch.OutOfMemoryError as e:
        rec["error"] = str(e)
        rec["oom_step"], rec["oom_batch"] = step, batch
        rec["traceback_tail"] = traceback.format_exc().splitlines()[-6:]
        rec["memory_stats"] = torch.cuda.memory_stats()
        rec["segments"] = segments_summary(torch.cuda.memory_snapshot())
        rec["mem_get_info"] = torch.cuda.mem_get_info()
        if a.snapshot:
            torch.cuda.memory._dump_snapshot(a.snapshot)
            torch.cuda.memory._record_memory_history(enabled=None)
        with open(a.json, "w") as f:
            json.dump(rec, f, indent=1, default=str)
        print("oom at step %s batch %s: %s" % (step, batch, rec["error"][:300]))
        sys.stdout.flush()
        if a.hook:
            raise  # the process dies of it, as a real run does: the hook sees it


if __name__ == "__main__":
    main()
