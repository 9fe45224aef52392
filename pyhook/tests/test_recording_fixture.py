"""The recording fixtures (testdata/recordings, written by the Go recorder
and read by its tests) hold hook messages exactly as this hook encodes them:
the file format embeds the wire protocol, and both sides read the same
files."""

import json
import os

from conftest import ROOT
from vramscope import _messages

RECORDINGS = os.path.join(ROOT, "testdata", "recordings")


def lines(name):
    with open(os.path.join(RECORDINGS, name), encoding="utf-8") as f:
        return f.read().split("\n")


def test_small_recording_header_and_events():
    rows = [json.loads(l) for l in lines("small.jsonl") if l]
    header, events = rows[0], rows[1:]
    assert header["vramscope_recording"] == 1 and header["version"].startswith("1.")
    kinds = {next(k for k in ("msg", "gpu", "note") if k in e) for e in events}
    assert kinds == {"msg", "gpu", "note"}
    assert all(isinstance(e["t"], float) for e in events)


def test_recorded_hook_messages_are_what_the_hook_encodes():
    msgs = [json.loads(l)["msg"] for l in lines("small.jsonl") if l and '"msg"' in l]
    assert {m["type"] for m in msgs} >= {"hello", "phase", "sample"}
    for m in msgs:
        # The hook's encoder turns the message back into the same JSON.
        assert json.loads(_messages.encode(m)) == m, m["type"]


def test_torn_recording_ends_in_a_torn_line():
    torn = lines("torn.jsonl")
    assert torn[-1] != "", "the fixture must end without a newline"
    try:
        json.loads(torn[-1])
    except ValueError:
        pass
    else:
        raise AssertionError("the last line of torn.jsonl parses: it is not torn")
    for l in torn[:-1]:
        json.loads(l)


def test_future_recording_has_a_newer_major_version():
    header = json.loads(lines("future.jsonl")[0])
    assert header["vramscope_recording"] > 1
