#!/usr/bin/env python3
"""Counts what the hook runs in one plain training step: its Python frames and
bytecode instructions, per function, beside torch's own Python in the same step.

Deterministic (sys.settrace with per-opcode events; nothing is timed), so a
change's effect on the hook's work shows without this box's timing noise;
bench/cost_model.py gives the time. Counts depend on the Python version
(3.11 here); torch's own count is the baseline to compare with.

With --hf the model is shaped as a transformers model given labels:
called with keyword inputs, ``model(input_ids=x, labels=y).loss``, and
returning its loss and logits in an OrderedDict (a ``ModelOutput``).

With --old REV the same step is counted again under that revision's hook
(cost_model.old_package), in the same process after this tree's is removed.

    PYTHONPATH=pyhook python3 bench/hook_ops.py [--steps-before 5] [--micro 4] [--measured] [--hf]
        [--vary] [--old REV]

With --vary each step has a new batch size (dynamic batching) and the
watch starts at step 0: the counted step is the watch's --steps-before'th
(after 8 steps, one whose scaled anatomy waits: _schedule.SCALED_EVERY;
after 5, one that sends it).
"""

import argparse
import collections
import os
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

import fakecuda  # noqa: E402
import shapes  # noqa: E402
from cost_model import DYNAMIC, old_package  # noqa: E402 (DYNAMIC: --vary's batch sizes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps-before", type=int, default=5, help="warm-up steps before the counted one")
    ap.add_argument("--every-phase", action="store_true",
                    help="the design that reads and resets at every phase of every step")
    ap.add_argument("--measured", action="store_true",
                    help="a measured step (activations_every=1: saved tensors and anatomy)")
    ap.add_argument("--micro", type=int, default=1,
                    help="forward/backward passes per step (gradient accumulation)")
    ap.add_argument("--hf", action="store_true",
                    help="keyword inputs and a ModelOutput with the loss, as a transformers model")
    ap.add_argument("--vary", action="store_true",
                    help="a new batch size at every step (dynamic batching: %s), the watch "
                         "from step 0 (its first steps measured, as in a run)" % (DYNAMIC,))
    ap.add_argument("--old", help="also count the hook of this git revision (or package directory)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the client warns that nothing listens
    import torch

    torch.set_num_threads(1)
    fake = fakecuda.FakeAllocator(0).install(torch)
    body = shapes.mlp(torch)
    model = shapes.lm_head(torch, body) if args.hf else body
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    ce = torch.nn.functional.cross_entropy
    batches = {b: (torch.randn(b, 256), torch.randint(0, 10, (b,))) for b in DYNAMIC}
    taken = [0]

    def step():
        nonlocal x, y
        if args.vary:
            x, y = batches[DYNAMIC[taken[0] % len(DYNAMIC)]]
            taken[0] += 1
        opt.zero_grad()
        for _ in range(args.micro):
            if args.hf:
                model(input_ids=x, labels=y).loss.backward()
            else:
                ce(model(x), y).backward()
        opt.step()

    def traced(pkg):
        """One step under sys.settrace: bytecodes and calls by (who, file,
        function), "vramscope" for the code under the directory ``pkg``."""
        ops, calls = collections.Counter(), collections.Counter()

        def tracer(frame, event, arg):
            path = frame.f_code.co_filename
            who = ("vramscope" if path.startswith(pkg) else
                   "fake allocator" if "fakecuda" in path else "torch/other")
            key = (who, os.path.basename(path), frame.f_code.co_name)
            if event == "call":
                calls[key] += 1
                frame.f_trace_opcodes = True
            elif event == "opcode":
                ops[key] += 1
            return tracer

        sys.settrace(tracer)
        step()
        sys.settrace(None)
        return ops, calls

    for _ in range(args.steps_before):
        step()
    # torch's own Python in the same step without the hook: registered hooks
    # take torch's slower paths (Module._call_impl, the optimizer's wrapper)
    unwatched = sum(n for key, n in traced(os.path.join(ROOT, "pyhook", "vramscope"))[0].items()
                    if key[0] == "torch/other")
    hooks = [("", "vramscope")]
    if args.old:
        old_package(args.old, tempfile.mkdtemp())
        hooks.append(("old %s: " % args.old, "vsold"))
    what = ("one measured step" if args.measured else "one plain step") \
        + (" of a transformers-shaped model" if args.hf else "") \
        + (" (every phase read+reset)" if args.every_phase else "") \
        + (" of %d micro-steps" % args.micro if args.micro > 1 else "") \
        + (" of a new batch size (dynamic batching), step %d of the watch" % args.steps_before
           if args.vary else "")
    for tag, name in hooks:
        mod = __import__(name, fromlist=["_client", "_config", "_cuda", "_watch"])
        cfg = mod._config.resolve(socket=os.path.join(tempfile.mkdtemp(), "none.sock"),
                                  environ={}, activations_every=1 if args.measured else 100)
        client = mod._client.Client(cfg, cuda=mod._cuda.detect(torch, model),
                                    torch_version=torch.__version__)
        # a default plain step, past the always-measured first steps (with
        # --vary from step 0: a scaled anatomy needs a measurement)
        client.step = 0 if args.vary else 3
        taken[0] = 0
        watcher = mod._watch.Watcher(torch, client, model, opt, client.config)
        watcher.breakdown_always = args.every_phase
        for _ in range(args.steps_before):
            step()
        ops, calls = traced(os.path.dirname(os.path.abspath(mod.__file__)))
        watcher.remove()
        client.close("done", timeout=1)
        for key, n in sorted(ops.items(), key=lambda kv: -kv[1]):
            if key[0] == "vramscope":
                print("%s%6d %3d  %s:%s" % (tag, n, calls[key], key[1], key[2]))
        by = collections.Counter()
        frames = collections.Counter()
        for key, n in ops.items():
            by[key[0]] += n
        for key, n in calls.items():
            frames[key[0]] += n
        print((tag + what + " (Python %d.%d, torch %s): vramscope %d opcodes in %d frames; "
               "torch's own Python %d opcodes (%d in the same step unwatched); the fake "
               "allocator's %d (not the hook's)")
              % (sys.version_info[0], sys.version_info[1], torch.__version__, by["vramscope"],
                 frames["vramscope"], by["torch/other"], unwatched, by["fake allocator"]))
    fake.uninstall()

if __name__ == "__main__":
    main()
