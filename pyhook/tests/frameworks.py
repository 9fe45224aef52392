"""Helpers of the real-framework tests (test_fw_*.py): the
framework itself or a loud skip (a failure under VRAMSCOPE_REQUIRE_FRAMEWORKS=1,
which `make test-py` sets for its torch 2.x venv run), and a real
``vramscope record`` receiving the hook in this process."""

import importlib
import os

import pytest

from test_e2e import has_goodbye, report_json, start, stop_ok, the_process

REQUIRE = os.environ.get("VRAMSCOPE_REQUIRE_FRAMEWORKS") == "1"
PHASES = ["zero_grad", "forward", "loss", "backward", "step"]


def need(name):
    """Import ``name``, or skip (fail with VRAMSCOPE_REQUIRE_FRAMEWORKS=1)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if REQUIRE:
            pytest.fail("%s is not importable and VRAMSCOPE_REQUIRE_FRAMEWORKS=1: %s" % (name, exc))
        pytest.skip("%s is not installed (the torch 2.x venv of `make test-py` has it)" % name)


def need_attr(obj, attr, what):
    if not hasattr(obj, attr):
        if REQUIRE:
            pytest.fail("%s is missing and VRAMSCOPE_REQUIRE_FRAMEWORKS=1" % what)
        pytest.skip("%s is missing on this torch" % what)


class Recording:
    """A ``vramscope record`` process; ``sock`` is where to watch() to."""

    def __init__(self, vs_bin, workdir, recorders, name="fw"):
        self.vs_bin = vs_bin
        self.out = os.path.join(workdir, name + ".jsonl")
        self.sock = os.path.join(workdir, name + ".sock")
        self.rec = start(recorders, vs_bin, self.out, self.sock)

    def process(self):
        """Wait for the hook's goodbye, stop the recorder, return report --json's process."""
        self.rec.wait_for(has_goodbye, "the hook's goodbye")
        stop_ok(self.rec)
        return the_process(report_json(self.vs_bin, self.out))


def phase_counts(step):
    return {p["phase"]: p["count"] for p in step["phases"]}


def phase_order(step):
    return [p["phase"] for p in step["phases"]]
