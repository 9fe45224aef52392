#!/usr/bin/env python3
"""A/B of the hook's per-step cost: an older revision against this tree.

Both versions run in one process on the same model and data, in rotating
interleaved blocks (plain, old and new hook, each with no monitor and with a
real `vramscope record` listening), so machine noise hits them alike. For
each mode it prints the median cost per phase (zero_grad, forward+loss,
backward, step) and per step against the plain loop, the per-step mean
without the slowest 2 %, and the process CPU per step including the
sender's flush.

    PYTHONPATH=pyhook python3 bench/step_ab.py --old REV [--size tiny|wide]
        [--blocks 40] [--steps 50] [--bin bin/vramscope]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"tiny": (256, 64, 16), "wide": (512, 256, 32)}  # input, width, batch


def old_package(rev, into):
    """Extracts pyhook/vramscope at rev as the importable package vsold."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "pyhook/vramscope"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    os.rename(os.path.join(into, "pyhook", "vramscope"), os.path.join(into, "vsold"))
    sys.path.insert(0, into)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision of the hook to compare with")
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--steps", type=int, default=50, help="steps per block")
    ap.add_argument("--bin", default=os.environ.get("VRAMSCOPE_BIN", os.path.join(ROOT, "bin", "vramscope")))
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="vsab", dir="/tmp")
    procs = []
    try:
        old_package(args.old, work)
        sys.path.insert(0, os.path.join(ROOT, "pyhook"))
        import torch
        import vsold  # noqa: F401
        import vramscope  # noqa: F401
        from vsold import _client as oc, _config as ocf, _watch as ow
        from vramscope import _client as nc, _config as ncf, _watch as nw

        torch.manual_seed(0)
        inp, width, batch = SIZES[args.size]
        model = torch.nn.Sequential(torch.nn.Linear(inp, width), torch.nn.ReLU(),
                                    torch.nn.Linear(width, width), torch.nn.ReLU(),
                                    torch.nn.Linear(width, 10))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        x, y = torch.randn(batch, inp), torch.randint(0, 10, (batch,))
        ns, ce = time.perf_counter_ns, torch.nn.functional.cross_entropy

        def loop(acc, n):
            for _ in range(n):
                t0 = ns(); opt.zero_grad(); t1 = ns()
                loss = ce(model(x), y); t2 = ns()
                loss.backward(); t3 = ns()
                opt.step(); t4 = ns()
                acc.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0))

        def monitor(name):
            path = os.path.join(work, name + ".sock")
            procs.append(subprocess.Popen([args.bin, "record", "-o", os.path.join(work, name + ".jsonl"),
                                           "--socket", path],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            while not os.path.exists(path):
                time.sleep(0.02)
            return path

        modes, clients = {}, []
        for tag, C, CF, W in (("old", oc, ocf, ow), ("new", nc, ncf, nw)):
            alone = C.Client(CF.resolve(socket=os.path.join(work, "none.sock"), environ={}))
            live = C.Client(CF.resolve(socket=monitor(tag), environ={}))
            clients += [alone, live]
            modes[tag + " no monitor"] = (W, alone)
            modes[tag + " monitor"] = (W, live)

        loop([], 50)  # warm up
        times = {"plain": []}
        times.update((k, []) for k in modes)
        cpu = dict.fromkeys(times, 0.0)
        order = list(times)
        for b in range(args.blocks):
            r = b % len(order)  # rotate: what ran before a block moves its time
            for k in order[r:] + order[:r]:
                W, c = modes.get(k, (None, None))
                w = W.Watcher(torch, c, model, opt, c.config) if W else None
                p0 = time.process_time()
                loop(times[k], args.steps)
                if w:
                    w.remove()
                time.sleep(0.07)  # past the sender's deadline: its work for this block is done
                cpu[k] += time.process_time() - p0

        def trimmed_mean(v, cut=0.02):
            v = sorted(v)[:len(v) - int(len(v) * cut)]
            return sum(v) / len(v)

        n = len(times["plain"])
        base = [statistics.median(s[i] for s in times["plain"]) for i in range(5)]
        bmean = trimmed_mean([s[4] for s in times["plain"]])
        print("%s MLP, %d steps per mode, old = %s, load %.2f; deltas against plain, us"
              % (args.size, n, args.old, os.getloadavg()[0]))
        for k, v in times.items():
            med = [statistics.median(s[i] for s in v) for i in range(5)]
            mean = trimmed_mean([s[4] for s in v])
            print("  %-15s zero_grad %+5.1f fwd+loss %+5.1f backward %+5.1f step %+5.1f | "
                  "median step %7.1f (%+6.1f) | mean %+6.1f (%+5.1f %%) | cpu %+6.1f"
                  % (k, *[(med[i] - base[i]) / 1e3 for i in range(4)], med[4] / 1e3,
                     (med[4] - base[4]) / 1e3, (mean - bmean) / 1e3, (mean / bmean - 1) * 100,
                     (cpu[k] - cpu["plain"]) / n * 1e6))
        for c in clients:
            c.close("removed", timeout=1)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
