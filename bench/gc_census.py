#!/usr/bin/env python3
"""What the hook leaves to Python's garbage collector, on the real
allocator (--device cuda) or the cost model's fake one: the tracked objects
one allocator read makes, and over --steps watched steps (no monitor, the
messages kept for a later one) the collections by generation and the
objects that the collections moved into the oldest generation, by type,
against the same steps unwatched.

A read of torch's ``_cuda_memoryStats`` is a new nested dict each time; the
hook keeps it until its sender's round. Objects alive at a young collection
are promoted, and enough promoted ones set off a full collection, whose
pause grows with the whole process's heap (docs/hook.md, "The garbage
collector").

--heap N keeps N more objects alive beside the model, as a training
process keeps its data, its framework and its logs: the oldest generation
is collected only once the objects promoted into it since its last
collection are a quarter of it, so a small test process sees full
collections that a real one would see more rarely, and longer.

    PYTHONPATH=pyhook python3 bench/gc_census.py [--device cuda] [--steps 3000] [--heap 500000]
"""
import argparse
import collections
import gc
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cost_model  # noqa: E402
import fakecuda  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--read-us", type=float, default=fakecuda.H100_READ_US)
    ap.add_argument("--reset-us", type=float, default=fakecuda.H100_RESET_US)
    ap.add_argument("--old", help="also run the hook of this git revision")
    ap.add_argument("--heap", type=int, default=0, help="other objects kept alive (lists)")
    cost_model.with_allocator(ap.parse_args(), run)


def run(args, torch, fake, work, procs):
    cuda = args.device == "cuda"
    model, opt, x, y = cost_model.training_of(torch, "h100mlp" if cuda else "tiny", args.device)
    ce = torch.nn.functional.cross_entropy

    def loop(n):
        for _ in range(n):
            opt.zero_grad()
            ce(model(x), y).backward()
            opt.step()
    heap = [[i] for i in range(args.heap)]  # noqa: F841 (kept alive)
    loop(20)
    raw = torch._C._cuda_memoryStats(0)
    gc.disable()
    c0 = gc.get_count()[0]
    torch._C._cuda_memoryStats(0)
    made = gc.get_count()[0] - c0
    gc.enable()
    print("one read: %d top-level keys, %d dicts of which %d tracked; the young generation's "
          "count grew %d; torch %s, Python %s, %s"
          % (len(raw), *fakecuda.gc_load(raw), made, torch.__version__, sys.version.split()[0],
             torch.cuda.get_device_name(0) if cuda else "the cost model's fake allocator"))
    counts, full, started = [0, 0, 0], [], [0.0]

    def on_gc(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            counts[info["generation"]] += 1
            if info["generation"] == 2:
                full.append((time.perf_counter() - started[0]) * 1e3)
    sock = os.path.join(work, "none.sock")
    packages = [("watch", "vramscope")] + ([("old watch", "vsold")] if args.old else [])
    for name, pkg in [("plain", None)] + packages:
        w = client = None
        if pkg:
            mod = __import__(pkg, fromlist=["_client", "_config", "_cuda", "_watch"])
            client = mod._client.Client(mod._config.resolve(socket=sock, environ={}),
                                        cuda=mod._cuda.detect(torch, model),
                                        torch_version=torch.__version__)
            w = mod._watch.Watcher(torch, client, model, opt, client.config)
            loop(20)
        gc.collect()
        before = collections.Counter(type(o).__name__ for o in gc.get_objects(2))
        counts[:] = [0, 0, 0]
        full.clear()
        gc.callbacks.append(on_gc)
        t0 = time.perf_counter()
        loop(args.steps)
        t = time.perf_counter() - t0
        gc.callbacks.remove(on_gc)
        grown = collections.Counter(type(o).__name__ for o in gc.get_objects(2)) - before
        print("%-10s %d steps in %.1f s: collections %d/%d/%d (generations 0/1/2)%s; the oldest "
              "generation grew by %d objects%s" % (
                  name, args.steps, t, *counts,
                  " (full: %s ms)" % ", ".join("%.0f" % f for f in full) if full else "",
                  sum(grown.values()),
                  (": " + ", ".join("%d %s" % (n, k) for k, n in grown.most_common(6)))
                  if grown else ""))
        if w is not None:
            w.remove()
            client.close("removed", timeout=2)


if __name__ == "__main__":
    main()
