"""A training loop that leaks on purpose, to see the leaking-rank alert fire
(docs/cluster.md, "Check the leaking-rank alert"). Each step keeps its loss
tensor and a 4 MiB buffer alive (about 8 MiB a step on the CPU with torch
1.13), so the memory held between steps grows;
vramscope's diagnosis calls that a leak and VramscopeRankLeaking fires
after 5 minutes of it.

    VRAMSCOPE_JOB=alert-check python monitoring/examples/leak_check.py --minutes 8

It runs on the GPU when there is one, else on the CPU (then the figures are
the process's resident memory, which leaks the same way).
"""

import argparse
import time

import torch

import vramscope

p = argparse.ArgumentParser()
p.add_argument("--minutes", type=float, default=8.0)
p.add_argument("--step-seconds", type=float, default=0.5)
args = p.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).to(device)
opt = torch.optim.Adam(model.parameters())
vramscope.watch(model, opt)
kept = []
end = time.monotonic() + 60 * args.minutes
while time.monotonic() < end:
    opt.zero_grad()
    x = torch.randn(64, 512, device=device)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    kept.append((loss, torch.ones(1 << 20, device=device)))  # the leak: 4 MiB a step
    time.sleep(args.step_seconds)
