"""What `vramscope run`'s auto-attach costs (docs/run.md, "Measured").

1. Python start-up with the startup directory `vramscope run` writes
   (launch/sitecustomize.py + the hook package) against plain start-up:
   `python -c pass`, alternating runs, medians.
2. The attach's search at the first training forward, with a 48-layer MLP
   split between two optimizers (SGD with momentum for the matrices, AdamW
   for the biases, as Muon and AdamW split a model) and 200k extra Python
   objects: find_optimizer and split_partners sharing one pass over the
   live objects (live_optimizers), as the attach asks them, against each
   making its own.

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


def attach_search(rounds=7):
    import torch
    from vramscope import _autoattach as aa

    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(48)])
    mats = torch.optim.SGD([m.weight for m in model], lr=0.1, momentum=0.9)
    rest = torch.optim.AdamW([m.bias for m in model])
    junk = [{"i": i} for i in range(200000)]  # a script's own objects

    def shared():
        found = aa.live_optimizers(torch)
        opt = aa.find_optimizer(torch, model, found)
        return opt, aa.split_partners(torch, model, opt, found)

    def separate():
        opt = aa.find_optimizer(torch, model)
        return opt, aa.split_partners(torch, model, opt)

    times = {shared: [], separate: []}
    for _ in range(rounds):
        for fn, xs in times.items():
            t = time.perf_counter()
            opt, partners = fn()
            xs.append(time.perf_counter() - t)
            assert opt is mats and partners == [rest]
    print("the attach's search over %d live objects, median (min) of %d alternating rounds: "
          "one shared walk %.1f ms (%.1f), a walk each %.1f ms (%.1f)"
          % (len(gc.get_objects()), rounds,
             statistics.median(times[shared]) * 1e3, min(times[shared]) * 1e3,
             statistics.median(times[separate]) * 1e3, min(times[separate]) * 1e3))
    del junk


if __name__ == "__main__":
    startup()
    attach_search()
