#!/usr/bin/env python3
"""Whether the hook makes the training thread wait for the GPU: the cost
model's 8x2048 MLP with Adam runs --steps unsynced steps under
``torch.cuda.set_sync_debug_mode("warn")``, which warns at every operation
that synchronises with the device, first without the hook, then watched
(no monitor). Prints the warnings' count and where they came from.

    PYTHONPATH=pyhook python3 bench/gpu/sync_check.py [--steps 300]
"""
import argparse
import collections
import os
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import cost_model  # noqa: E402
import torch  # noqa: E402

import vramscope  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    model, opt, x, y = cost_model.training_of(torch, "h100mlp", "cuda")
    ce = torch.nn.functional.cross_entropy
    sock = os.path.join(tempfile.mkdtemp(), "none.sock")  # no monitor: messages kept
    for hooked in (False, True):
        w = vramscope.watch(model, opt, socket=sock) if hooked else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            for _ in range(a.steps):
                opt.zero_grad()
                ce(model(x), y).backward()
                opt.step()
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        sync = [c for c in caught if "synchroniz" in str(c.message)]
        where = collections.Counter("%s:%s" % (c.filename, c.lineno) for c in sync)
        print("%s: %d steps, %d synchronising operations%s" % (
            "watched" if hooked else "plain", a.steps, len(sync),
            "".join("\n  %5d at %s" % (n, k) for k, n in where.most_common(8))))
        if w is not None:
            w.remove()


if __name__ == "__main__":
    main()
