"""The job identity in the hello (docs/protocol.md, "Job identity"): the
shared fixture testdata/protocol/job.json gives each launcher's environment
and the job object the hook must read from it; ipc/job_test.go decodes the
same objects on the monitor's side."""

import json
import os
import subprocess
import sys
import warnings

import pytest

from conftest import ROOT, FakeCuda, Recorder, make_config
from vramscope import _client, _job, _messages


def fixture():
    with open(os.path.join(ROOT, "testdata", "protocol", "job.json")) as f:
        return json.load(f)


CASES = fixture()["environments"]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_each_environment_gives_the_fixtures_job(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _job.read_job(case["env"]) == case["job"]
        hello = _messages.build_hello(make_config(), "abc", None, None, environ=case["env"])
    if case["job"] is None:
        assert "job" not in hello
    else:
        assert hello["job"] == case["job"]
        line = _messages.encode(hello)
        assert json.loads(line)["job"] == case["job"]


def test_every_value_fits_the_monitors_bound():
    for case in CASES:
        for value in (case["job"] or {}).values():
            assert len(value.encode("utf-8")) <= _job.MAX_FIELD
            assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value)


class Hostile(dict):
    """An environment whose reads fail: identity is optional, watch() goes on."""

    def get(self, *a):
        raise RuntimeError("environ is broken")


def test_a_broken_environment_gives_no_job_and_raises_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _job.read_job(Hostile()) is None
        assert _job.read_job({"SLURM_JOB_ID": b"81234"}) is None  # not text: ignored


def test_the_client_reads_the_job_once_when_it_builds_its_hello(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "81234")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-node-03")
    calls = []
    real = _messages.read_job
    monkeypatch.setattr(_messages, "read_job", lambda env: calls.append(1) or real(env))
    c = _client.Client(make_config(), cuda=FakeCuda(), start=False)
    try:
        assert c.hello["job"] == {"id": "81234", "source": "slurm", "node": "gpu-node-03"}
        assert len(calls) == 1
        for step in range(3):  # steps read no environment
            c.phase("forward", "begin", step=step)
            c.phase("forward", "end", step=step)
        assert len(calls) == 1
    finally:
        c.close("removed", timeout=0.2)


def test_the_leak_check_example_is_one_leaking_rank_of_its_job(torch_mod, vs_bin, workdir, recorders):
    """docs/cluster.md's alert check, end to end on the CPU: the example
    run with VRAMSCOPE_JOB and Slurm's variables under a real monitor is,
    in the job report of its recording, one rank of that job, on its node,
    leaking (about 8 MiB a step on torch 1.13's CPU)."""
    out, sock = os.path.join(workdir, "r.jsonl"), os.path.join(workdir, "s.sock")
    rec = Recorder(vs_bin, out, sock)
    recorders.append(rec)
    env = dict(os.environ, VRAMSCOPE_SOCKET=sock, VRAMSCOPE_JOB="alert-check", SLURM_JOB_ID="81234",
               SLURM_STEP_ID="0", SLURMD_NODENAME="node-3", PYTHONPATH=os.path.join(ROOT, "pyhook"))
    proc = subprocess.run([sys.executable, "-W", "error:::vramscope", os.path.join(ROOT, "monitoring", "examples", "leak_check.py"),
                           "--minutes", "0.1", "--step-seconds", "0.02"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "the hook printed: " + proc.stderr
    code, err = rec.stop()
    assert code == 0, err
    report = subprocess.run([vs_bin, "report", "--job", "--json", out], capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    view = json.loads(report.stdout)
    assert view["jobs"] == ["alert-check"]
    (rank,) = view["ranks"]
    assert rank["job"] == {"id": "alert-check", "source": "vramscope", "step": "0", "node": "node-3",
                           "pod": "", "namespace": ""}
    assert rank["pattern"] == "growth" and rank["growth"]["kind"] == "leak", rank
    assert 4 << 20 <= rank["growth"]["held_per_step"] <= 16 << 20, rank["growth"]
    assert [r["pid"] for r in view["leaking"]] == [rank["pid"]]
