"""The hook's messages match the shared fixtures in testdata/protocol/valid.jsonl."""

import json
import os

from conftest import ROOT, FakeCuda, make_config
from vramscope import _client, _messages, _watch
import vramscope

# Keys docs/protocol.md marks optional (absent is allowed).
OPTIONAL = {"hello": {"nspid", "job"}, "mem": {"alloc_retries", "ooms"},
            "phase": {"input", "span", "same_as", "model"},  # input: training forward begins;
            "anatomy": {"model"}}  # span, same_as: plain steps; model: automatic phases
# Fields docs/protocol.md types as "X or null"; the fixture shows one of the two.
NULLABLE = {"mem", "torch", "cuda", "activations", "batch_size", "rank", "local_rank",
            "world_size", "batch", "tokens", "activations_step", "activations_batch",
            "activations_tokens", "activations_source", "saved", "loss", "kept"}


def fixture_messages():
    with open(os.path.join(ROOT, "testdata", "protocol", "valid.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _mem_shape():
    mems = [m["mem"] for m in fixture_messages() if isinstance(m.get("mem"), dict)]
    return shape_of(mems)


def kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    return "object"


def shape_of(messages):
    """Per key: the JSON kinds seen, and for objects the shape of their keys."""
    shape = {}
    for m in messages:
        for k, v in m.items():
            kinds, sub = shape.setdefault(k, (set(), []))
            kinds.add(kind(v))
            if isinstance(v, dict):
                sub.append(v)
    return {k: (kinds, shape_of(sub) if sub else None) for k, (kinds, sub) in shape.items()}


MEM_SHAPE = _mem_shape()


def check(msg, shape, optional, where):
    want = set(shape) - optional
    got = set(msg)
    assert want <= got <= set(shape) | optional, "%s: keys %s, fixture %s" % (where, sorted(got), sorted(shape))
    for k, v in msg.items():
        if k not in shape:
            continue  # an optional key this fixture message leaves out
        kinds, sub = shape[k]
        if k in NULLABLE:
            kinds = kinds | {"null"}
            if k == "mem":
                kinds, sub = kinds | {"object"}, MEM_SHAPE
        assert kind(v) in kinds, "%s.%s: %s, fixture has %s" % (where, k, kind(v), kinds)
        if isinstance(v, dict) and sub is not None:
            check(v, sub, OPTIONAL.get(k, set()), where + "." + k)


def test_every_message_type_matches_the_fixture(torch_mod, monitor):
    torch = torch_mod
    fixtures = {}
    for m in fixture_messages():
        fixtures.setdefault(m["type"], []).append(m)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters())
    client = _client.Client(make_config(socket=monitor.path, sample_hz=200), cuda=FakeCuda(),
                            torch_version=torch.__version__, stats_interval=0.05)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    vramscope._api._current = client
    with vramscope.phase("eval"):
        vramscope.mark("checkpoint")
    assert monitor.wait_for(lambda m: any(x["type"] == "stats" for x in m.messages())
                            and any(x["type"] == "sample" for x in m.messages()))
    watcher.remove()
    client.close("removed", timeout=2)
    vramscope._api._current = None
    assert monitor.wait_for(lambda m: m.messages()[-1]["type"] == "goodbye")
    got = monitor.messages()
    types = {m["type"] for m in got}
    assert types == set(fixtures), "the hook produces every type the fixtures show"
    shapes = {t: shape_of(ms) for t, ms in fixtures.items()}
    for m in got:
        check(m, shapes[m["type"]], OPTIONAL.get(m["type"], set()), m["type"])
    assert got[-1]["type"] == "goodbye" and got[-1]["reason"] == "removed"
    assert got[-1]["stats"]["created"] == got[-1]["seq"] + 1
    assert all(len(line) + 1 <= _messages.MAX_LINE for line in monitor.raw)
    users = [m for m in got if m["type"] == "phase" and m["user"]]
    assert [(m["name"], m["edge"]) for m in users] == [("eval", "begin"), ("eval", "end")]


def test_cpu_hello_matches_the_cpu_fixture_and_is_null_where_unknown(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    cpu = [m for m in fixture_messages() if m["type"] == "hello" and m["cuda"] is None][0]
    hello = _messages.build_hello(make_config(), "abc", None, None)
    check(json.loads(_messages.encode(hello)), shape_of([cpu]), OPTIONAL["hello"], "hello")
    assert hello["cuda"] is None and hello["rank"] is None and hello["seq"] == 0


def test_hello_reads_rank_env_and_nspid(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "bogus")
    hello = _messages.build_hello(make_config(), "abc", "1.13.1", None)
    assert (hello["rank"], hello["local_rank"], hello["world_size"]) == (3, 1, None)
    if os.path.exists("/proc/self/status"):
        assert hello["nspid"][-1] == os.getpid() or hello["nspid"][0] == os.getpid()


def test_read_nspid_parses_nested_namespaces(tmp_path):
    p = tmp_path / "status"
    p.write_text("Name:\tpython\nNSpid:\t4242\t17\t1\nPPid:\t1\n")
    assert _messages.read_nspid(str(p)) == [4242, 17, 1]
    p.write_text("Name:\tpython\n")
    assert _messages.read_nspid(str(p)) is None
    assert _messages.read_nspid(str(tmp_path / "missing")) is None


def test_huge_argv_is_clipped_and_the_line_stays_under_the_limit():
    argv = ["é" * 5000] * 100 + ["\udcff-undecodable"]
    hello = _messages.build_hello(make_config(), "abc", "x" * 10000, None, argv=argv)
    line = _messages.encode(hello)
    assert len(line) <= _messages.MAX_LINE
    decoded = json.loads(line)
    assert len(decoded["argv"]) == 32
    assert all(len(a.encode()) <= 256 for a in decoded["argv"])
    assert decoded["argv"][0] == "é" * 128
    assert len(decoded["torch"].encode()) <= 4096


def test_encode_refuses_nan_and_oversized_lines():
    import pytest
    with pytest.raises(ValueError):
        _messages.encode({"v": 1, "type": "sample", "seq": 1, "t": float("nan")})
    with pytest.raises(ValueError, match="exceeds"):
        _messages.encode({"v": 1, "type": "mark", "seq": 1, "t": 1.0, "name": "x" * 70000})
    assert _messages.encode({"v": 1}) == b'{"v":1}\n'


def test_user_names_are_clipped_to_64_bytes(monkeypatch):
    name = vramscope._api._user_name("ñ" * 100)
    assert len(name.encode()) <= 64 and name == "ñ" * 32
    assert vramscope._api._user_name("  ") == "unnamed"
