"""What `vramscope run`'s auto-attach costs (docs/run.md, "Measured").

1. Python start-up with the startup directory `vramscope run` writes
   (launch/sitecustomize.py + the hook package) against plain start-up:
   `python -c pass`, alternating runs, medians.
2. find_optimizer: the one pass over the live objects at the first training
   forward, with a 48-layer MLP, AdamW and 200k extra Python objects.

Run: PYTHONPATH=pyhook /usr/bin/python3 bench/autoattach_costs.py
"""

import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def startup(runs=40):
    d = tempfile.mkdtemp(prefix="vs-bench-")
    try:
        shutil.copy(os.path.join(ROOT, "launch", "sitecustomize.py"), d)
        shutil.copytree(os.path.join(ROOT, "pyhook", "vramscope"), os.path.join(d, "vramscope"))
        plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        hooked = dict(plain, PYTHONPATH=d, VRAMSCOPE_SOCKET="/nonexistent/vs.sock")
        a, b = [], []
        for _ in range(runs):
            for env, xs in ((plain, a), (hooked, b)):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
                xs.append(time.perf_counter() - t)
        print("python -c pass, median of %d alternating runs: plain %.1f ms, with the startup dir %.1f ms"
              % (runs, statistics.median(a) * 1e3, statistics.median(b) * 1e3))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def find_optimizer():
    import torch
    from vramscope import _autoattach

    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(48)])
    opt = torch.optim.AdamW(model.parameters())
    junk = [{"i": i} for i in range(200000)]  # a script's own objects
    xs = []
    for _ in range(7):
        t = time.perf_counter()
        found = _autoattach.find_optimizer(torch, model)
        xs.append(time.perf_counter() - t)
    assert found is opt
    print("find_optimizer over %d live objects: median %.1f ms, min %.1f ms"
          % (len(gc.get_objects()), statistics.median(xs) * 1e3, min(xs) * 1e3))
    del junk


if __name__ == "__main__":
    startup()
    find_optimizer()
