"""Exact peaks end to end: the real hook with its default settings, on the
simulated H100 allocator (bench/fakecuda.py: seed 001's figures), into a
real ``vramscope record``, then ``vramscope report``: after the warmup no
figure is a lower bound (no ``≥``), steps the hook read once say "same
phases as step 2", and the need is step 1's peak, exact."""

import os
import subprocess
import sys

from test_e2e import report, report_json, start, stop_ok

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PINLOOP = os.path.join(HERE, "pinloop.py")
STEP1_PEAK = 4518008832  # s001_stat_cuda.json: every step from 1 on


def test_a_default_hook_run_reports_no_lower_bound_after_warmup(vs_bin, workdir, recorders):
    out, sock = os.path.join(workdir, "run.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "pyhook"))
    proc = subprocess.run([sys.executable, PINLOOP, "--hook", "--socket", sock], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec.wait_for(lambda ms: any(m["type"] == "goodbye" for m in ms), "the hook's goodbye")
    stop_ok(rec)

    rep = report_json(vs_bin, out)
    p = rep["processes"][0]
    d = p["diagnosis"]
    assert d["pattern"] == "warmup" and d["steady_from"] == 2, d["headline"]
    warm = d["steady_from"]
    for st in p["steps"]:
        assert st["peak_known"] == "exact", st
        if st["step"] < warm:
            continue
        assert st["peak_allocated"] == STEP1_PEAK, st
        if st["plain"]:
            assert st["same_as"] == 2 and st["within"] == 0, st
        else:
            assert all(ph["peak_exact"] for ph in st["phases"]), st
    assert d["need"]["allocated"] == STEP1_PEAK and d["need"]["allocated_known"]["is"] == "exact"

    text = report(vs_bin, out)
    table = text.split("  totals:")[0]
    after = table.split("\n      %d  " % warm, 1)[1]
    assert "≥" not in after, after
    assert "same phases as step 2 (exact to the byte): step peak 4309 MiB" in after
    assert "needed (steady peak): 4309 MiB allocated" in text
