"""The sender's encoder: the fast path for phase, sample and mark must say
exactly what json.dumps says, and anything else must take the generic path."""

import json
import math

import pytest

from conftest import load_fixture_stats, make_config, queued
from vramscope import _client, _cuda, _messages

MEM6 = _cuda.mem_from_stats(load_fixture_stats())
MEM4 = {k: MEM6[k] for k in ("allocated", "max_allocated", "reserved", "max_reserved")}
NAMES = ["forward", 'q"uote\\back', "ñandú ✓", "ctl\n\t\x01", "100%d %s", ""]


def generic(msg):
    return json.dumps(msg, allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def hot_messages():
    for name in NAMES:
        for mem in (None, MEM4, MEM6):
            yield {"v": 1, "type": "phase", "seq": 7, "t": 1234.000001, "name": name,
                   "step": 3, "micro": 1, "edge": "end", "user": True, "mem": mem}
            yield {"v": 1, "type": "mark", "seq": 8, "t": 0.5, "name": name, "step": 0,
                   "mem": mem}
    yield {"v": 1, "type": "sample", "seq": 2 ** 40, "t": 1e-7, "mem": MEM6}
    for size in ({"batch": 8, "tokens": 4096}, {"batch": 8, "tokens": None},
                 {"batch": None, "tokens": None}):
        yield {"v": 1, "type": "phase", "seq": 9, "t": 2.5, "name": "forward", "step": 1,
               "micro": 0, "edge": "begin", "user": False, "mem": MEM6, "input": size}


@pytest.mark.parametrize("msg", list(hot_messages()))
def test_fast_path_matches_json_dumps(msg):
    text = _messages._fast(msg)
    assert text is not None, "the builders' shapes take the fast path"
    line = _messages.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == msg == json.loads(generic(msg))
    assert text == generic(msg) + "\n", "byte for byte, key order included"


@pytest.mark.parametrize("change", [
    {"extra": 1}, {"step": 1.5}, {"step": True}, {"seq": None}, {"user": 1},
    {"mem": {"allocated": 1.0}}, {"mem": [1]}, {"name": 5}, {"v": 2}, {"t": 3},
    {"input": {"batch": 1.5, "tokens": None}}, {"input": [8]}, {"input": {"batch": 8}},
    {"input": {"batch": 8, "x": 1}}, {"input": {"tokens": 1, "batch": 8}},
    {"input": {"batch": -1, "tokens": None}}, {"input": {"batch": True, "tokens": None}},
])
def test_other_shapes_take_the_generic_path(change):
    msg = {"v": 1, "type": "phase", "seq": 1, "t": 1.0, "name": "x", "step": 0,
           "micro": 0, "edge": "begin", "user": False, "mem": None}
    msg.update(change)
    assert _messages._fast(msg) is None
    assert json.loads(_messages.encode(msg)) == msg


@pytest.mark.parametrize("t", [math.nan, math.inf, -math.inf])
def test_non_finite_time_is_refused_on_every_path(t):
    for kind in ("phase", "sample"):
        msg = {"v": 1, "type": kind, "seq": 1, "t": t, "mem": None}
        if kind == "phase":
            msg.update(name="x", step=0, micro=0, edge="begin", user=False)
        with pytest.raises(ValueError):
            _messages.encode(msg)


def test_an_oversized_fast_line_is_refused():
    with pytest.raises(ValueError):
        _messages.encode({"v": 1, "type": "mark", "seq": 1, "t": 1.0, "name": "x" * 70000,
                          "step": 0, "mem": None})


def test_client_messages_take_the_fast_path():
    client = _client.Client(make_config(), start=False)
    client.phase("forward", "begin")
    client.phase("forward", "begin", input={"batch": 4, "tokens": 32})
    client.mark("checkpoint")
    for msg in queued(client):
        assert _messages._fast(msg) == generic(msg) + "\n"


RAW6 = _cuda.compact(load_fixture_stats())
# A read's six values (_cuda.compact of the binding's dict), as the sender keeps it
VALUES6 = tuple(MEM6[field] for field, _ in _cuda.MEM_KEYS)


def edge_fields():
    """Queued tuples as the training thread makes them: a switch's seven
    fields, an edge's nine; shapes the direct line writes and shapes it
    leaves to the generic encoder."""
    extras = (None, {"input": {"batch": 8, "tokens": None}}, {"span": "step"},
              {"span": "step", "same_as": 12}, {"span": "step", "same_as": 1.5},
              {"other": 1}, {"input": {"batch": 8}})
    for name in NAMES:
        for extra in extras:
            for model in (None, "Sequential", 'm"odel ✓', "m%d%%s"):
                yield (2.5, name, "loss", 3, 1, extra, model)
                yield (2.5, None, name, 3, 0, extra, model)
                yield (2.5, name, None, 3, 0, extra, model)
                for raw in (None, RAW6, VALUES6, VALUES6[:4] + (None, None),
                            (-1,) + VALUES6[1:], (True,) + VALUES6[1:], MEM6,
                            load_fixture_stats()):
                    for user in (False, True):
                        yield (1234.000001, name, 3, 1, "end", user, raw, extra,
                               None if user else model)
    yield (2.5, "x" * 70000, None, 3, 0, None, None)


@pytest.mark.parametrize("fields", list(edge_fields()))
def test_an_edge_is_written_as_its_messages_are(fields):
    item = (41, fields)
    want = b"".join(_messages.encode(msg) for msg in _messages.phase_messages(item)) \
        if "x" * 70000 not in fields else None
    if want is None:
        with pytest.raises(ValueError):
            _messages.encode_item(item)
        return
    assert _messages.encode_item(item) == want
    for line, msg in zip(want.splitlines(), _messages.phase_messages(item)):
        assert line.decode("utf-8") == generic(msg), "byte for byte, key order included"
