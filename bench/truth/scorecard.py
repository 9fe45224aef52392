"""The truth corpus's scorecard: every kind (kinds.py) run through the real
hook on the simulated allocator (drive.py), recorded by the real
``vramscope record``, judged from ``vramscope report --json`` against the
allocator's own ledger. Prints kinds × checks; exits 1 when a cell fails.

    python3 bench/truth/scorecard.py [--bin bin/vramscope] [--jobs 2] [--json OUT] [KIND ...]

Checks (a cell is ``ok``, ``FAIL`` with why, or ``-`` where it does not apply):

* pattern: the report's pattern is the kind's.
* onset: a growth's onset and the level changes' steps (±2 steps: a rise
  over several steps is found where it passes the band).
* rate: a growth's bytes per step, within 2 %.
* need: the need equals the allocator's highest peak after the first 3
  steps (the kind's ``warmup`` where longer, its ``need_from`` after a
  fall; of all steps for growth), and an evaluation above it is the
  need's evaluation part.
* phase: the session peak and its phase are the allocator's (or, for a
  step read once that repeats no breakdown step, said to be unknown).
* labels: no complete step is a bound, each stated peak is the
  allocator's to the byte, the need is not a bound; in a run where nothing
  moves, every step read once repeats a breakdown step (same_as).
* held: each step's held memory is what the allocator held after it (none
  where the kind says the hook cannot know it: held_unknown).
* ending: the dying step is partial and left out, its phase named; a
  clean run ends cleanly; no step is a micro-step of another (each has
  the kind's passes: its micro-steps and its attack's), and the
  steps whose update was skipped (GradScaler) are said to be skipped, and
  a skip every kth step all run long is said to be one (skip_period).
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import kinds  # noqa: E402

CHECKS = ("pattern", "onset", "rate", "need", "phase", "labels", "held", "ending")
KEEP = None  # --keep
WARMUP = 3  # the diagnosis's WarmupMaxSteps: a need is read after them (or the kind's ``warmup``)


def record(binary, kind, work):
    """Run ``kind`` under ``vramscope record``; return (report JSON, truths by rank)."""
    out, sock = os.path.join(work, "run.jsonl"), os.path.join(work, "s.sock")
    err = open(os.path.join(work, "record.stderr"), "wb")
    rec = subprocess.Popen([binary, "record", "-o", out, "--socket", sock],
                           stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 15
    while not os.path.exists(sock):
        if rec.poll() is not None or time.monotonic() > deadline:
            rec.kill()
            raise RuntimeError("vramscope record did not listen on %s" % sock)
        time.sleep(0.02)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "pyhook"), PYTHONWARNINGS="ignore")
    ranks = kind.world or 1
    procs = []
    for r in range(ranks):
        cmd = [sys.executable, os.path.join(HERE, "drive.py"), kind.name, "--socket", sock,
               "--truth", os.path.join(work, "truth%d.json" % r), "--rank", str(r)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE))
    for p in procs:
        _, perr = p.communicate(timeout=600)
        if p.returncode and not kind.expect.get("oom"):
            raise RuntimeError("%s exited %d: %s" % (kind.name, p.returncode, perr[-2000:]))
    _wait_goodbyes(out, ranks)
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=30)
    err.close()
    rep = subprocess.run([binary, "report", "--json", out], capture_output=True, text=True,
                         timeout=120)
    if rep.returncode:
        raise RuntimeError("report: %s" % rep.stderr)
    truths = []
    for r in range(ranks):
        with open(os.path.join(work, "truth%d.json" % r)) as f:
            truths.append(json.load(f))
    return json.loads(rep.stdout), truths


def _wait_goodbyes(out, n, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(out, "rb") as f:
                if f.read().count(b'"type":"goodbye"') >= n:
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.1)


class Truth:
    """The allocator's figures of one process."""

    def __init__(self, raw):
        self.oom = raw["oom"]
        dead = self.oom["step"] if self.oom else None
        self.peak, self.phase, self.held = {}, {}, {}
        for key, phases in raw["steps"].items():
            i = int(key)
            if i == dead:
                continue
            name = max(phases, key=lambda p: phases[p])  # the first of equals: dicts keep order
            self.peak[i], self.phase[i] = phases[name], name
        self.held = {int(k): v for k, v in raw["held"].items() if int(k) != dead}
        # Steps that ran out of memory and that the loop skipped (skip_failed):
        # never finished, so not among the steps judged one by one; their
        # peaks are still the run's
        self.failed = {int(k): v for k, v in raw.get("failed", {}).items()}
        # why each failed: "oom", or "error" (another exception the loop caught)
        self.failed_reason = {int(k): v for k, v in raw.get("failed_reason", {}).items()}
        self.failed_peak = {}
        for i in self.failed:
            self.peak.pop(i, None)
            self.held.pop(i, None)
            phases = raw["steps"].get(str(i), {})
            if phases:
                name = max(phases, key=lambda p: phases[p])
                self.failed_peak[i] = (phases[name], name)
        self.evals = {name: max(v.values()) for name, v in raw["eval"].items()}
        self.inputs = {int(k): v for k, v in raw["inputs"].items()}


def eval_name(kind):
    """What the report calls the allocator's ``eval``: the evaluation of a
    model the hook does not watch (eval_model) is no forward it sees, only
    memory used between steps (docs/hook.md, "Between steps")."""
    return "between_steps" if kind.eval_model else "eval"


def judge(kind, expect, proc, truth):
    d = proc["diagnosis"]
    cells = {}

    def cell(name, ok, why=""):
        cells[name] = "ok" if ok else "FAIL " + why

    steps = [s for s in proc["steps"] if s["step"] in truth.peak]
    kind_ok = "growth_kind" not in expect or d["growth_kind"] == expect["growth_kind"]
    want = expect["pattern"] if isinstance(expect["pattern"], tuple) else (expect["pattern"],)
    cell("pattern", d["pattern"] in want and kind_ok,
         "%s %s, want %s %s: %s" % (d["pattern"], d["growth_kind"], expect["pattern"],
                                    expect.get("growth_kind", ""), d.get("headline", "")))

    onset = []
    if "growth_from" in expect:
        if abs(d["growth_from"] - expect["growth_from"]) > 2:
            onset.append("growth from %s, want %d" % (d["growth_from"], expect["growth_from"]))
    levels = [c["step"] for c in d.get("level_changes") or []]
    want = expect.get("level", [])
    if len(levels) != len(want) or any(abs(a - b) > 2 for a, b in zip(levels, want)):
        onset.append("level changes %s, want %s" % (levels, expect.get("level", [])))
    if "growth_from" in expect or "level" in expect or levels:
        cell("onset", not onset, "; ".join(onset))
    else:
        cells["onset"] = "-"

    if "rate" in expect:
        got = d.get("held_per_step") or d.get("growth_per_step") or 0
        cell("rate", abs(got - expect["rate"]) <= 0.02 * expect["rate"],
             "%.0f B/step, want %d" % (got, expect["rate"]))
    else:
        cells["rate"] = "-"

    growth = expect["pattern"] == "growth"
    warm = expect.get("warmup", WARMUP)
    start = expect.get("need_from", warm)
    after = [v for i, v in truth.peak.items() if growth or i >= start] or list(truth.peak.values())
    need = d["need"]
    want = max(after) if after else None
    why = []
    if need["allocated"] != want:
        why.append("need %s, allocator %s" % (need["allocated"], want))
    if expect.get("eval_need"):
        ev = max(truth.evals.values())
        if need.get("phase_peak") != ev or need.get("phase_name") != eval_name(kind):
            why.append("eval part %s %s, allocator %s" % (need.get("phase_name"),
                                                          need.get("phase_peak"), ev))
    cell("need", not why, "; ".join(why))

    top, top_phase = None, ""
    if truth.peak:
        top_step = max(truth.peak, key=lambda i: (truth.peak[i], -i))
        top, top_phase = truth.peak[top_step], truth.phase[top_step]
    for name, v in truth.evals.items():
        if top is None or v > top:
            top, top_phase = v, eval_name(kind) if name == "eval" else name
    for v, name in truth.failed_peak.values():
        if top is None or v > top:
            top, top_phase = v, name
    pk = d["peak"]
    # A step read once that moved has no phase of its own: "" (said so) is true.
    unplaced = pk["phase"] == "" and any(s["step"] == pk["step"] and s["plain"]
                                         for s in proc["steps"])
    cell("phase", pk["allocated"] == top and (pk["phase"] == top_phase or unplaced),
         "%s in %r, allocator %s in %r" % (pk["allocated"], pk["phase"], top, top_phase))

    bad = []
    for s in steps:
        if s["peak_known"] == "bound":
            bad.append("step %d bound" % s["step"])
        elif s["peak_allocated"] != truth.peak[s["step"]]:
            bad.append("step %d %s %s, allocator %s" % (s["step"], s["peak_known"],
                                                        s["peak_allocated"], truth.peak[s["step"]]))
    if need["allocated"] is not None and need["allocated_known"]["is"] == "bound":
        bad.append("need is a bound")
    same_input = len({v for i, v in truth.inputs.items() if i >= WARMUP}) <= 1 \
        and len({kind.passes_at(i) for i in range(WARMUP, kind.steps)}) <= 1
    if not kind.noise and not kind.noise_bytes and same_input and expect["pattern"] != "growth" \
            and not expect.get("level"):
        # Nothing moves after the first steps (and the step after them,
        # which may still differ from the last breakdown step, or after a
        # skipped update, or a k-fold loop's new fold): every step read
        # once repeats a breakdown step (same_as), none is said to have moved.
        starts = tuple(kind.skipped) + tuple(kind.no_backward) + tuple(kind.fold_starts())
        # A GAN's models take turns: its first steps are its first turns
        turn = kind.critic + 1 if kind.layout == "gan" else 1
        for s in steps:
            if s["step"] >= (warm + 2) * turn and s["plain"] and (s["moved"] or s["same_as"] < 0) \
                    and not any(0 <= s["step"] - k <= 2 for k in starts):
                bad.append("step %d read once, moved %s, same_as %s" % (s["step"], s["moved"], s["same_as"]))
    cell("labels", not bad, "%d: %s" % (len(bad), "; ".join(bad[:3])))

    unknown = set(expect.get("held_unknown", ()))
    bad = ["step %d %s, allocator %s" % (s["step"], s["held"], truth.held[s["step"]])
           for s in steps if s["held"] != (None if s["step"] in unknown else truth.held[s["step"]])]
    cell("held", not bad, "%d: %s" % (len(bad), "; ".join(bad[:3])))

    end, why = d.get("end") or {}, []
    if truth.oom:
        dead = truth.oom["step"]
        if proc["partial_step"] != dead:
            why.append("partial step %s, died in %d" % (proc["partial_step"], dead))
        if end.get("oom_phase") != truth.oom["phase"]:
            why.append("oom phase %r, died in %r" % (end.get("oom_phase"), truth.oom["phase"]))
        if proc["steps_total"] != dead:
            why.append("steps_total %s, finished %d" % (proc["steps_total"], dead))
        steady = max((truth.inputs[i] for i in truth.peak), default=truth.inputs[dead])
        ratio = truth.inputs[dead] / steady
        if ratio > 1 and abs((end.get("input_ratio") or 0) - ratio) > 0.01:
            why.append("the input's %.1f× not named (%s)" % (ratio, end.get("input_ratio")))
    elif end.get("abrupt"):
        why.append("ended abruptly")
    said = {f["step"]: f for f in (d.get("failed_steps") or {}).get("steps") or []}
    rows = {s["step"]: s for s in proc["steps"]}
    for i, phase in sorted(truth.failed.items()):
        if rows.get(i, {}).get("failed") != truth.failed_reason.get(i, "oom") \
                or said.get(i, {}).get("phase") != phase:
            why.append("step %d failed in %s: row %s, said %s" % (i, phase, rows.get(i, {}).get("failed"),
                                                                 said.get(i)))
            break
    if not truth.failed and any(s.get("failed") for s in proc["steps"]):
        why.append("a step said failed")
    # a train-mode attack's passes are the step's too (in eval mode: an evaluation)
    attack = kind.attack if kind.attack_mode == "train" else 0
    for s in steps:
        micro = kind.passes_at(s["step"]) + attack
        if s["micro"] != micro:
            why.append("step %d micro %d, ran %d" % (s["step"], s["micro"], micro))
            break
        if s["skipped"] != (s["step"] in kind.skipped + kind.no_backward):
            why.append("step %d skipped %s" % (s["step"], s["skipped"]))
            break
    period = (d.get("skipped_steps") or {}).get("period") or 0
    if period != expect.get("skip_period", 0):
        why.append("skipped every %s steps, want %s" % (period, expect.get("skip_period", 0)))
    if proc["steps_total"] != len(truth.peak) and not truth.oom:
        why.append("steps_total %s, ran %d" % (proc["steps_total"], len(truth.peak)))
    cell("ending", not why, "; ".join(why))
    return cells


def run_kind(binary, kind):
    t0 = time.monotonic()
    if KEEP:
        work = os.path.join(KEEP, kind.name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work, mode=0o700)
        rep, truths = record(binary, kind, work)
    else:
        with tempfile.TemporaryDirectory(prefix="truth-") as work:
            rep, truths = record(binary, kind, work)
    procs = sorted(rep["processes"], key=lambda p: p.get("rank") or 0)
    rows = []
    for r, (proc, raw) in enumerate(zip(procs, truths)):
        expect = dict(kind.expect)
        expect.update((kind.expect.get("ranks") or {}).get(r, {}))
        if expect.get("pattern") != "growth":
            for key in ("growth_from", "rate", "growth_kind"):
                expect.pop(key, None)
        name = kind.name + ("/rank%d" % r if len(truths) > 1 else "")
        rows.append((name, judge(kind, expect, proc, Truth(raw)), proc["diagnosis"]["headline"]))
    return rows, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write the cells as JSON here")
    ap.add_argument("-v", action="store_true", help="print each process's headline")
    ap.add_argument("--keep", help="keep each kind's recording and truth under this folder")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    global KEEP
    KEEP = args.keep
    chosen = [kinds.KINDS[n] for n in args.names] if args.names else kinds.K
    for k in chosen:
        if not kinds.available(k):
            print("%s: left out, %s is not installed" % (k.name, kinds.NEEDS[k.layout]))
    chosen = [k for k in chosen if kinds.available(k)]
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda k: run_kind(args.bin, k), chosen))
    rows = [row for rs, _ in results for row in rs]
    width = max(len(r[0]) for r in rows)
    print("%-*s  %s" % (width, "kind", "  ".join("%-7s" % c for c in CHECKS)))
    fails = []
    for name, cells, headline in rows:
        print("%-*s  %s" % (width, name, "  ".join(
            "%-7s" % ("ok" if cells[c] == "ok" else "-" if cells[c] == "-" else "FAIL")
            for c in CHECKS)))
        fails += ["%s %s: %s" % (name, c, cells[c][5:]) for c in CHECKS if cells[c].startswith("FAIL")]
        if args.v:
            print("    " + headline)
    total = sum(1 for _, cells, _ in rows for c in CHECKS if cells[c] != "-")
    print("\n%d of %d cells right, %d kinds, %.0f s" % (total - len(fails), total, len(rows),
                                                         time.monotonic() - t0))
    for f in fails:
        print("  " + f)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: cells for name, cells, _ in rows}, f, indent=1, sort_keys=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
