#!/usr/bin/env python3
"""The hook's rows of the cost table, old against new: runs bench/cost_model.py
and bench/host_cost.py with ``--old REV`` (each old and new in one process,
blocks rotated) and prints one table with the targets.

Rows: the plain CUDA step under the cost model (12.8 us a read, 1.0 us a
reset), the CPU-run step reading the host's RSS, the measured step against a
plain one, and an accumulation micro-step; each as the median, the paired
median and the 10th percentile of training-thread CPU time, because on a
shared box the median carries the neighbours' load. Then the same loop in a
long run (bench/steady_cost.py): the mean step, every thread's work counted,
without a monitor and, where ``--bin`` names a built ``vramscope``, with one
recording. Last, the counts that no load moves: the hook's bytecodes and
frames in each step kind (bench/hook_ops.py) and, where valgrind is
installed, the training thread's added instructions and L1 cache misses
a plain step (bench/hook_instructions.py --cache-sim).

    PYTHONPATH=pyhook python3 bench/cost_table.py --old REV [--blocks 30] [--bin bin/vramscope]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(script, *args):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script)] + list(args),
                         check=True, capture_output=True, text=True).stdout
    return out


def cost_model_rows(text):
    """{tag: {"plain": (median, paired, p10), "measured": (x, x10), "micro": (m, m10)}}."""
    rows = {}
    for tag in ("", "old "):
        m = re.search(r"^%sratios \(training-thread cpu per plain step, median ([-\d.]+) us, "
                      r"paired ([-\d.]+) us, p10 ([-\d.]+) us\):" % tag, text, re.M)
        if m is None:
            continue
        rest = text[m.end():].split("ratios (", 1)[0]
        meas = re.search(r"measured step / plain step hook cost: ([-\d.]+)x \(p10: ([-\d.]+)x\)",
                         rest)
        acc = re.search(r"accumulation: [-\d.]+ us per step, ([-\d.]+) us per micro-step "
                        r"\(p10: [-\d.]+, ([-\d.]+)\)", rest)
        rows[tag] = {"plain": tuple(float(g) for g in m.groups()),
                     "measured": tuple(float(g) for g in meas.groups()) if meas else None,
                     "micro": tuple(float(g) for g in acc.groups()) if acc else None}
    return rows


def host_rows(text):
    """{tag: (paired median, reads a step)} from host_cost's table."""
    rows = {}
    for tag in ("", "old "):
        m = re.search(r"^%shook, host RSS\s+[-\d.]+\s+([-+\d.]+)\s+\S+\s+([-\d.]+)$" % tag,
                      text, re.M)
        if m:
            rows[tag] = (float(m.group(1)), float(m.group(2)))
    return rows


def steady_rows(text):
    """{mode: (+wall, +thread, +process)} from steady_cost's table."""
    rows = {}
    for m in re.finditer(r"^((?:old )?watch(?:, monitor)?)\s+[-\d.]+\s+([-+\d.]+)\s+([-+\d.]+)"
                         r"\s+([-+\d.]+)", text, re.M):
        rows[m.group(1)] = tuple(float(g) for g in m.groups()[1:])
    return rows


def ops_rows(text):
    """{tag: (bytecodes, frames)} from hook_ops's summary lines ("" new, "old " old)."""
    rows = {}
    for m in re.finditer(r"^(old \S+: )?one .*?: vramscope (\d+) opcodes in (\d+) frames", text, re.M):
        rows["old " if m.group(1) else ""] = (int(m.group(2)), int(m.group(3)))
    return rows


def instruction_rows(text):
    """{tag: (instructions, L1i misses, L1d misses)} from hook_instructions's table."""
    rows = {}
    for m in re.finditer(r"^  (this tree|old \S+)\s+\d+\s+hook \+(\d+)"
                         r"(?:, L1 misses \+(\d+) instruction, \+(\d+) data)?", text, re.M):
        rows["" if m.group(1) == "this tree" else "old "] = tuple(
            int(g) if g is not None else None for g in m.groups()[1:])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision of the hook to compare with")
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"),
                    help="vramscope binary for the steady rows with a monitor (if built)")
    args = ap.parse_args()
    blocks = str(args.blocks)
    cm = run("cost_model.py", "--no-profiler", "--old", args.old, "--blocks", blocks)
    load_cm = os.getloadavg()[0]
    hc = run("host_cost.py", "--old", args.old, "--blocks", blocks)
    load_hc = os.getloadavg()[0]
    monitor = ["--bin", args.bin] if os.access(args.bin, os.X_OK) else []
    st = run("steady_cost.py", "--old", args.old, *monitor)
    load_st = os.getloadavg()[0]
    c, h, s = cost_model_rows(cm), host_rows(hc), steady_rows(st)
    new, old = c.get(""), c.get("old ")
    print(cm.splitlines()[0])
    print(hc.splitlines()[0])
    print(st.splitlines()[0])
    print("loads at the end of each run: %.2f, %.2f, %.2f" % (load_cm, load_hc, load_st))
    print()
    print("| measure | old (%s) | new | target |" % args.old)
    print("|---|---|---|---|")

    def us3(v):
        return "+%.1f / +%.1f / +%.1f µs (median / paired / p10)" % v

    print("| plain CUDA step, training-thread time, cost model | %s | %s | ≤ 30 µs |"
          % (us3(old["plain"]), us3(new["plain"])))
    print("| plain CPU-run step (RSS reads) | %+.1f µs, %.2f reads a step | %+.1f µs, "
          "%.2f reads a step | ≤ 25 µs |" % (h["old "] + h[""]))
    if new["measured"] and old["measured"]:
        print("| measured step / plain step | %.2f× (p10 %.2f×) | %.2f× (p10 %.2f×) | ≤ 2× |"
              % (old["measured"] + new["measured"]))
    if new["micro"] and old["micro"]:
        print("| accumulation, per micro-step | %.1f µs (p10 %.1f) | %.1f µs (p10 %.1f) | "
              "≤ 10 µs |" % (old["micro"] + new["micro"]))
    for mode, what in (("watch", "no monitor"), ("watch, monitor", "a monitor recording")):
        if mode in s and "old " + mode in s:
            print("| plain CUDA step in a long run, %s: mean added wall / training thread / "
                  "every thread | %+.1f / %+.1f / %+.1f µs | %+.1f / %+.1f / %+.1f µs | "
                  "≤ 33 µs wall (1 %% of 3.34 ms) |" % ((what,) + s["old " + mode] + s[mode]))
    for what, flags in (("plain step", ()), ("measured step", ("--measured",)),
                        ("step of 4 micro-steps", ("--micro", "4"))):
        o = ops_rows(run("hook_ops.py", "--old", args.old, *flags))
        if "" in o and "old " in o:
            print("| %s: the hook's bytecodes and frames (hook_ops.py) | %d in %d | %d in %d "
                  "| – |" % ((what,) + o["old "] + o[""]))
    if shutil.which("valgrind"):
        n = instruction_rows(run("hook_instructions.py", "--old", args.old, "--cache-sim"))
        if "" in n and "old " in n:
            print("| plain step: the training thread's added instructions; L1 misses, "
                  "instruction + data (hook_instructions.py --cache-sim) | +%d; +%d + %d | "
                  "+%d; +%d + %d | – |" % (n["old "] + n[""]))


if __name__ == "__main__":
    main()
