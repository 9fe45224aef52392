#!/usr/bin/env python3
"""What the hook adds to a Lightning step: training-thread CPU time per
optimizer step of a real ``Trainer.fit`` with the callback, against the
same fit without it (and, with ``--old REV``, the callback of another
revision in the same process).

The step is timed from the first ``on_train_batch_start`` to the last
``on_train_batch_end`` of the callbacks (a timer before vramscope's and
one after it), so Lightning's own work in the step is in every mode and
the data loader's is in none. The module is the README's layout
(bench/shapes.py ``lightning_module``: ``training_step`` calls the
submodules), on CPU, where the hook reads the RSS at the step's end (with
``--cuda-model``, the cost model's simulated CUDA allocator instead);
nothing listens on the socket (the sender drops what it cannot send, off
the training thread). Modes run in rotated rounds, a fresh Trainer each;
the first ``--skip`` steps of each fit are left out (the hook measures
steps 0-2). Reported: the median over rounds of each mode's median step,
and the added time against the round's own fit without the hook (paired).

With ``--device cuda`` the fit runs on the GPU and the hook reads the real
allocator: the module is the cost model's "h100mlp" (an 8x2048 MLP, Adam,
batch 512), each step is synced at both timers (as cost_model.py syncs its
steps), and the wall time per step is reported beside the CPU time.

    python bench/lightning_cost.py [--steps 300] [--rounds 6] [--old REV|DIR]
        [--cuda-model | --device cuda]

Needs Lightning (the torch-2 test venv has it: pyhook/requirements-torch2.txt).
"""

import argparse
import contextlib
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import shapes  # noqa: E402
from cost_model import old_package  # noqa: E402


# the cost model's "h100mlp" (bench/cost_model.py SIZES): input, width, batch, hidden layers
GPU_MLP = (2048, 2048, 512, 7)


def fit(L, torch, callback, steps, watch=None, gpu=False):
    """Per-step (training-thread CPU time, wall time), in µs, of one fit with
    ``callback`` (or none), ``watch`` called in ``configure_optimizers``
    (shapes.lightning_module). ``gpu``: on the GPU, each step synced."""
    times, started = [], [0, 0]
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    class Start(L.Callback):
        def on_train_batch_start(self, *args):
            sync()
            started[:] = time.thread_time_ns(), time.perf_counter_ns()

    class End(L.Callback):
        def on_train_batch_end(self, *args):
            sync()
            times.append(((time.thread_time_ns() - started[0]) / 1000.0,
                          (time.perf_counter_ns() - started[1]) / 1000.0))

    torch.manual_seed(0)
    if gpu:  # eight batches, each fetched whole (no per-sample collation), moved by Lightning
        inp, width, batch, hidden = GPU_MLP
        data = torch.utils.data.TensorDataset(torch.randn(8 * batch, inp),
                                              torch.randint(0, 10, (8 * batch,)))
        sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(data),
                                                batch, drop_last=True)
        loader = torch.utils.data.DataLoader(data, batch_size=None, sampler=sampler)
        module = shapes.lightning_module(L, torch, watch, mlp=(inp, width, hidden))
    else:
        data = torch.utils.data.TensorDataset(torch.randn(16 * steps, 256),
                                              torch.randint(0, 10, (16 * steps,)))
        loader = torch.utils.data.DataLoader(data, batch_size=16)
        module = shapes.lightning_module(L, torch, watch)
    callbacks = [Start()] + ([callback] if callback is not None else []) + [End()]
    trainer = L.Trainer(max_steps=steps, accelerator="gpu" if gpu else "cpu", devices=1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks)
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), \
            contextlib.redirect_stderr(quiet):
        trainer.fit(module, loader)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--skip", type=int, default=20, help="first steps of each fit left out")
    ap.add_argument("--old", help="also time the callback of this git revision (or of the "
                    "vramscope package copied in this directory)")
    ap.add_argument("--cuda-model", action="store_true",
                    help="the hook reads the cost model's CUDA allocator (bench/fakecuda.py: "
                    "12.8 µs a read, 1.0 µs a reset) instead of the host's RSS")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: fit on the GPU, the hook reading the real allocator")
    args = ap.parse_args()
    gpu = args.device == "cuda"
    if gpu and args.cuda_model:
        ap.error("--cuda-model simulates the allocator that --device cuda reads for real")
    warnings.simplefilter("ignore")  # nothing listens; Lightning's own notices
    logging.disable(logging.WARNING)
    try:
        import lightning as L
    except ImportError:
        import pytorch_lightning as L
    import torch
    torch.set_num_threads(1)
    fake = None
    if args.cuda_model:
        import fakecuda
        fake = fakecuda.FakeAllocator().install(torch)
    work = tempfile.mkdtemp(prefix="vs-lcost-")
    # An empty Callback: what Lightning's own dispatch of a callback's hooks
    # costs a step (every hook of every callback is called, each under the
    # profiler's context), the floor under any callback's cost.
    # The hook comes from the callback, or from watch() in
    # configure_optimizers (the handle removed after the fit).
    modes = [("no hook", None), ("empty", "empty"), ("new", "vramscope"),
             ("new, watch()", "vramscope watch")]
    if args.old:
        old_package(args.old, work)
        modes += [("old", "vsold"), ("old, watch()", "vsold watch")]
    import importlib
    sock = os.path.join(work, "none.sock")

    def one(package):
        if package is None:
            return fit(L, torch, None, args.steps, gpu=gpu)
        if package == "empty":
            return fit(L, torch, L.Callback(), args.steps, gpu=gpu)
        name, _, how = package.partition(" ")
        vs = importlib.import_module(name)
        if how == "watch":
            handles = []
            times = fit(L, torch, None, args.steps, lambda module, opt: handles.append(
                vs.watch(module, opt, socket=sock, sample_hz=0)), gpu=gpu)
            for h in handles:
                h.remove()
            return times
        cls = importlib.import_module(name + ".integrations.lightning").VramscopeCallback
        return fit(L, torch, cls(socket=sock, sample_hz=0), args.steps, gpu=gpu)

    clocks = ("CPU", "wall") if gpu else ("CPU",)
    medians = {(name, c): [] for name, _ in modes for c in range(len(clocks))}
    for r in range(args.rounds):
        for k in range(len(modes)):
            name, package = modes[(r + k) % len(modes)]  # rotated
            times = one(package)[args.skip:]
            for c in range(len(clocks)):
                medians[name, c].append(statistics.median(t[c] for t in times))
    if gpu:
        reads = "the real allocator on %s, each step synced" % torch.cuda.get_device_name(0)
    elif fake is not None:
        reads = "the cost model's CUDA reads (%d on the training thread)" % fake.training_reads
    else:
        reads = "host RSS reads"
    print("Lightning %s, torch %s, Python %d.%d; %d rounds x %d steps; load %.2f; %s"
          % (L.__version__, torch.__version__, sys.version_info[0], sys.version_info[1],
             args.rounds, args.steps, os.getloadavg()[0], reads))
    for c, clock in enumerate(clocks):
        base = medians["no hook", c]
        print("  %-12s step %7.1f µs (%s)" % ("no hook", statistics.median(base), clock))
        for name, _ in modes[1:]:
            added = [m - b for m, b in zip(medians[name, c], base)]
            print("  %-12s step %7.1f µs, added %+6.1f µs (%s, paired median; rounds %s)"
                  % (name, statistics.median(medians[name, c]), statistics.median(added),
                     clock, " ".join("%+.0f" % a for a in added)))


if __name__ == "__main__":
    main()
