"""The user's own counters, printed after every phase of a training loop
(as shared/recordings/h100/seed001.py's stat_cuda does), on the simulated
H100 allocator (bench/fakecuda.py's SimAllocator: the seed-001 model's
figures). test_exact_peaks.py runs it with and without ``--hook`` under
torch 1.13 and 2.x and asserts the prints are identical.

    PYTHONPATH=pyhook python3 pyhook/tests/pinloop.py [--hook] [--steps 8] [--messages FILE]

A user ``reset_peak_memory_stats()`` runs in step 2 after the loss and a
``reset_max_memory_allocated()`` in step 5 after the forward; with
``--hook`` the hook is removed before the last prints.
"""

import argparse
import hashlib
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fakecuda  # noqa: E402
import torch  # noqa: E402


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def stat(step, name):
    cuda = torch.cuda
    stats = cuda.memory_stats()
    print("%d %-9s alloc %d max %d reserved %d max %d | stats %s nested %s summary %s | "
          "active.peak %d segment.peak %d" % (
              step, name, cuda.memory_allocated(), cuda.max_memory_allocated(),
              cuda.memory_reserved(), cuda.max_memory_reserved(), digest(stats),
              digest(cuda.memory_stats_as_nested_dict()),
              hashlib.sha256(cuda.memory_summary().encode()).hexdigest()[:16],
              stats["active_bytes.all.peak"], stats["segment.all.peak"]), flush=True)
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "max_memory_allocated"):  # torch 2.x
        print("  accelerator max %d reserved max %d stats %s" % (
            acc.max_memory_allocated(0), acc.max_memory_reserved(0),
            digest(acc.memory_stats(0))), flush=True)


SimGrad = fakecuda.on_backward(torch)  # moves the simulated allocator as backward did


class Net(torch.nn.Module):
    def __init__(self, sim, step):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)
        self.sim, self.step = sim, step

    def forward(self, x):
        out = self.lin(x)
        self.sim.phase(self.step[0], "forward")
        return SimGrad.apply(out, lambda: self.sim.phase(self.step[0], "backward"))

    def zero_grad(self, *args, **kwargs):
        super().zero_grad(*args, **kwargs)
        self.sim.phase(self.step[0], "zero_grad")


class SimSGD(torch.optim.SGD):
    def __init__(self, params, sim, step):
        super().__init__(params, lr=0.1)
        self.sim, self.at = sim, step

    def step(self, closure=None):
        out = super().step(closure)
        self.sim.phase(self.at[0], "step")
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hook", action="store_true")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--socket", default=os.path.join(HERE, "no-monitor.sock"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    sim = fakecuda.SimAllocator().install(torch)
    step = [0]
    model = Net(sim, step)
    opt = SimSGD(model.parameters(), sim, step)
    handle = None
    if args.hook:
        sys.path.insert(0, os.path.join(ROOT, "pyhook"))
        import vramscope
        handle = vramscope.watch(model, opt, socket=args.socket)
    stat(-1, "beginning")
    x = torch.randn(16, 8)
    for i in range(args.steps):
        step[0] = i
        model.zero_grad()
        stat(i, "zero_grad")
        out = model(x)
        stat(i, "forward")
        if i == 5:
            torch.cuda.reset_max_memory_allocated()
            stat(i, "reset_max")
        if i == 6 and hasattr(getattr(torch, "accelerator", None), "reset_peak_memory_stats"):
            torch.accelerator.reset_peak_memory_stats(0)
            stat(i, "acc_reset")
        loss = out.pow(2).sum()
        sim.phase(i, "loss")
        stat(i, "loss")
        if i == 2:
            torch.cuda.reset_peak_memory_stats()
            stat(i, "reset")
        loss.backward()
        stat(i, "backward")
        opt.step()
        stat(i, "step")
    if handle is not None:
        handle.remove()
    stat(args.steps, "end")
    patched = torch._C._cuda_memoryStats is not sim
    torch.cuda.reset_peak_memory_stats()  # after remove(): the patches go with it
    stat(args.steps, "end_reset")
    print("patched after remove %s" % patched, file=sys.stderr)
    print("hook resets %d, reads %d, bindings restored %s" % (
        sim.resets, sim.reads, torch._C._cuda_memoryStats is sim), file=sys.stderr)
    print("weights %s" % digest([round(float(v), 6) for v in model.lin.weight.flatten()]))


if __name__ == "__main__":
    main()
