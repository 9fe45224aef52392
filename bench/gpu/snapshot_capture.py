#!/usr/bin/env python3
"""Real CUDA memory snapshots for the snapshot readers' tests.

Trains a small MLP with Adam on the GPU; from step --leak-from on, the loop
keeps each step's hidden activation (``kept.append(h)``, still attached to
its graph) — the one-line leak users write. ``_record_memory_history`` is
switched on for a window of steps only (--window, after --start) with a cap
on entries, exactly as a bounded capture would be, then ``_dump_snapshot``
writes the pickle. Prints the capture's cost (step time inside the window
against outside) and what torch's own ``torch.cuda._memory_viz`` makes of
the file.

    python3 bench/gpu/snapshot_capture.py -o leak.pickle [--steps 12] [--start 4] [--window 4]
"""
import argparse
import json
import pickle
import statistics
import time

import torch
import torch.cuda._memory_viz as viz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--start", type=int, default=4)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--leak-from", type=int, default=2)
    ap.add_argument("--max-entries", type=int, default=3000)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.GELU(),
                                torch.nn.Linear(a.width, a.width), torch.nn.GELU(),
                                torch.nn.Linear(a.width, 10)).cuda()
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(256, a.width, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    kept = []
    times = {"in": [], "out": []}
    for step in range(a.steps):
        if step == a.start:
            torch.cuda.memory._record_memory_history(max_entries=a.max_entries, stacks="python")
        torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad()
        h = model[1](model[0](x))
        out = model[4](model[3](model[2](h)))
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        if step >= a.leak_from:
            kept.append(h)  # the leak: each step's activation and its graph stay alive
        torch.cuda.synchronize()
        times["in" if a.start <= step < a.start + a.window else "out"].append(time.perf_counter() - t)
        if step == a.start + a.window - 1:
            torch.cuda.memory._dump_snapshot(a.o)
            torch.cuda.memory._record_memory_history(enabled=None)
    with open(a.o, "rb") as f:
        snap = pickle.load(f)
    traces = snap.get("device_traces", [[]])
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "segments": len(snap["segments"]), "trace_entries": sum(len(t) for t in traces),
           "step_ms_in_window": statistics.median(times["in"]) * 1e3,
           "step_ms_outside": statistics.median(times["out"][2:]) * 1e3,
           "allocated_at_end": torch.cuda.memory_allocated(),
           "kept_bytes_per_step": kept[0].untyped_storage().nbytes(),
           "viz_segments_html_bytes": len(viz.segment_plot(snap)),
           "viz_trace_html_bytes": len(viz.trace_plot(snap)),
           "viz_memory_text": viz.segsum(snap)[:400]}
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
