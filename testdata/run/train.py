"""A plain CPU training script with no vramscope in it, for `vramscope run`'s
end-to-end tests (e2e_run_test.go, pyhook/tests/test_autoattach.py).

  --steps N      training steps (default 5)
  --sleep S      seconds to sleep each step (to leave time for a signal)
  --exit CODE    exit with CODE after training
  --trap         on SIGTERM print "got SIGTERM" and exit 42
  --spawn        start a second copy of this script (same environment) first
  --watch        call vramscope.watch(model, opt) explicitly
  --ready FILE   create FILE once the first step is done
  --count-int    count SIGINTs; a second after the first, print the count and exit 3
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=5)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--exit", type=int, default=0)
p.add_argument("--trap", action="store_true")
p.add_argument("--spawn", action="store_true")
p.add_argument("--watch", action="store_true")
p.add_argument("--ready")
p.add_argument("--count-int", action="store_true")
a = p.parse_args()

sigints = []
if a.count_int:
    signal.signal(signal.SIGINT, lambda signum, frame: sigints.append(time.monotonic()))

if a.trap:
    def on_term(signum, frame):
        print("got SIGTERM", flush=True)
        sys.exit(42)
    signal.signal(signal.SIGTERM, on_term)

second = None
if a.spawn:
    argv = [sys.executable, __file__, "--steps", str(a.steps), "--sleep", str(a.sleep)]
    second = subprocess.Popen(argv)

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if a.watch:
    import vramscope
    vramscope.watch(model, opt)
loss_fn = torch.nn.MSELoss()
x, y = torch.randn(16, 32), torch.randn(16, 4)
with torch.no_grad():
    model.eval()
    model(x)  # a validation pass first, as Lightning's sanity check does: not a training step
    model.train()
for step in range(a.steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if step == 0 and a.ready:
        open(a.ready, "w").close()
    if a.sleep:
        time.sleep(a.sleep)
    if sigints and time.monotonic() - sigints[0] > 1.0:
        print("SIGINTs: %d" % len(sigints), flush=True)
        sys.exit(3)
print("trained %d steps in pid %d" % (a.steps, os.getpid()), flush=True)
if second is not None:
    second.wait()
sys.exit(a.exit)
