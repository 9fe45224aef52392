#!/usr/bin/env python3
"""Instructions the training thread executes per plain step (or, with
--measured, per measured step), with and without the hook, counted by
valgrind's callgrind: independent of the box's load, so a change's effect
shows on a loaded box where bench/cost_model.py's times cannot (it counts
instructions, not cache misses: the cost model gives the time). The cyclic
collector is off while steps are counted. The sender thread still runs and
takes the lock Python threads share, so repeated runs differ by a few percent.

Runs itself under ``valgrind --tool=callgrind`` with instrumentation off
until the measured steps (a tiny C helper, built with gcc from
valgrind/callgrind.h, toggles it), in one process: torch's tiny MLP loop
with the fake allocator at no cost (bench/fakecuda.py), plain, then watched
by this tree's hook, then (--old REV) by that revision's. With --measured
every step is a measured one (activations_every=1): the counted steps are
the watch's 21st to 170th measured steps, so the count is the average
measured step's, whatever share of them takes the split by module
(docs/anatomy.md, "By module").

With --cache-sim, callgrind also simulates the caches (its own model of a
32 KiB L1i, 48 KiB L1d and this box's last level) and each row gains the
hook's added L1 instruction and data misses: the share of a hook entry's
cost that comes from running after torch's kernels, which evict the
interpreter's code and the hook's objects between entries. Deterministic
too, and several times slower.

With --floor, bench/null_hook.py is counted too: the watch's entries
taking only the time, and one read and reset a step (the floor under any
hook with these entries).

    PYTHONPATH=pyhook python3 bench/hook_instructions.py [--steps 150] [--micro 1] [--old REV]
        [--measured] [--cache-sim] [--floor]
"""

import argparse
import ctypes
import gc
import os
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

HELPER = r"""
#include <valgrind/callgrind.h>
void vs_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void vs_stop(const char *name) { CALLGRIND_DUMP_STATS_AT(name); CALLGRIND_STOP_INSTRUMENTATION; }
void vs_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
"""


def measure(args, lib):
    import fakecuda
    warnings.simplefilter("ignore")  # the client warns that nothing listens
    import torch
    torch.set_num_threads(1)
    fakecuda.FakeAllocator(0, reset_us=0).install(torch)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    ce = torch.nn.functional.cross_entropy
    modes = [("plain", None), ("watch", "vramscope")]
    if args.old:
        modes.append(("old", "vsold"))
    if args.floor:
        modes.append(("floor", None))
    for name, pkg in modes:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 10))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        h = undo = None
        if name == "floor":
            import null_hook
            undo = null_hook.install(torch, model, opt)
        if pkg is not None:
            mod = __import__(pkg)
            # activations_every=0: no measured step, nor (since measured and
            # breakdown steps share the schedule's period) a scheduled
            # breakdown step falls among the counted ones: plain steps only.
            # With --measured, 1: every step measured, none a breakdown step.
            h = mod.watch(model, opt, socket=os.path.join(tempfile.mkdtemp(), "none.sock"),
                          sample_hz=0, activations_every=1 if args.measured else 0)
        for _ in range(20):  # past the first steps, read at every phase
            opt.zero_grad()
            ce(model(x), y).backward()
            opt.step()
        client = getattr(h, "client", None)
        if client is not None:
            # The sender sleeps through the counted steps (no wake at a full
            # batch, no poll): its turns on the lock Python threads share
            # would move the count by several percent run to run. Its work
            # on the queue is done between steps, uncounted, as it would be
            # off the training thread.
            client._wake_at, client._wake_from, client._poll = frozenset(), 1 << 62, 3600.0
            client._wake.set()  # its current wait ends; the next one is the long one
            time.sleep(0.5)
        gc.collect()
        gc.disable()  # a collection falls where the allocations do: not counted
        lib.vs_start()
        for _ in range(args.steps):
            opt.zero_grad()
            for _ in range(args.micro):
                ce(model(x), y).backward()
            opt.step()
            lib.vs_toggle()
            if client is not None:
                client._drain()
            lib.vs_toggle()
        lib.vs_stop(name.encode())
        if client is not None:
            client._poll = 0.05
            client._wake.set()
        gc.enable()
        if h is not None:
            h.remove()
        if undo is not None:
            undo()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--micro", type=int, default=1,
                    help="forward/backward passes per step (gradient accumulation)")
    ap.add_argument("--old", help="also count the hook of this git revision")
    ap.add_argument("--measured", action="store_true",
                    help="count measured steps (activations_every=1) instead of plain ones")
    ap.add_argument("--cache-sim", action="store_true",
                    help="also count the hook's added L1 cache misses (callgrind's cache model)")
    ap.add_argument("--floor", action="store_true",
                    help="also count bench/null_hook.py: the watch's entries taking only the time, "
                         "one read and reset a step")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if args.old:
            from cost_model import old_package
            old_package(args.old, tempfile.mkdtemp())
        measure(args, ctypes.CDLL(args.child))
        return
    work = tempfile.mkdtemp()
    src, lib = os.path.join(work, "vs.c"), os.path.join(work, "libvs.so")
    with open(src, "w") as f:
        f.write(HELPER)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    out = os.path.join(work, "cg")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
           "--cache-sim=%s" % ("yes" if args.cache_sim else "no"),
           "--callgrind-out-file=" + out, sys.executable, os.path.abspath(__file__),
           "--child", lib, "--steps", str(args.steps), "--micro", str(args.micro)] \
        + (["--old", args.old] if args.old else []) + (["--measured"] if args.measured else []) \
        + (["--floor"] if args.floor else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    per_step = {}
    for name in sorted(os.listdir(work)):
        if not name.startswith("cg.") or not name.endswith("-01"):
            continue  # thread 1 (the training thread) of each dump
        mode = total = None
        events = ["Ir"]
        with open(os.path.join(work, name)) as f:
            for line in f:
                if line.startswith("desc: Trigger: Client Request: "):
                    mode = line.split(": ")[-1].strip()
                elif line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith("totals:"):
                    total = dict(zip(events, map(int, line.split()[1:])))
        if mode is not None and total is not None:
            per_step[mode] = {k: v / args.steps for k, v in total.items()}
    base = per_step.get("plain")
    print("instructions per %s step%s on the training thread (callgrind; %d steps; tiny MLP, "
          "torch %s, fake allocator at no cost)"
          % ("measured" if args.measured else "plain",
             " of %d micro-steps" % args.micro if args.micro > 1 else "", args.steps,
             _torch_version()))
    for mode in ("plain", "watch", "old", "floor"):
        if mode in per_step:
            row = per_step[mode]
            extra = ""
            if mode != "plain":
                extra = "  hook +%.0f" % (row["Ir"] - base["Ir"])
                if "I1mr" in row:
                    extra += ", L1 misses +%.0f instruction, +%.0f data" % (
                        row["I1mr"] - base["I1mr"],
                        row["D1mr"] + row["D1mw"] - base["D1mr"] - base["D1mw"])
            label = {"watch": "this tree", "old": "old " + (args.old or ""),
                     "floor": "floor (null_hook.py)"}.get(mode, mode)
            print("  %-22s %10.0f%s" % (label, row["Ir"], extra))


def _torch_version():
    try:
        import torch
        return torch.__version__
    except ImportError:
        return "?"


if __name__ == "__main__":
    main()
