"""The hook and the monitor agree on the default socket path: both sides
read the cases from the shared fixture testdata/protocol/socket_paths.json."""

import json
import os
import pathlib

import pytest

import vramscope

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "protocol" / "socket_paths.json"
CASES = json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_default_socket_path_matches_the_monitor(case, monkeypatch):
    for key in ("VRAMSCOPE_SOCKET", "XDG_RUNTIME_DIR"):
        if case["env"].get(key):
            monkeypatch.setenv(key, case["env"][key])
        else:
            monkeypatch.delenv(key, raising=False)
    want = case["want"].replace("{uid}", str(os.getuid()))
    assert vramscope.default_socket_path() == want
