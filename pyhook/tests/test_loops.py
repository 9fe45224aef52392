"""The loop shapes people really write, each driven on real torch
through the real hook into a real ``vramscope record``, and checked in what
``vramscope report --json`` shows: the step count, each step's phases, the
watch names and the ranks (docs/hook.md, "Loop shapes").

The recorder and the report come from test_e2e.py's fixtures (the binary is
``$VRAMSCOPE_BIN`` or one ``go build``)."""

import os
import re
import subprocess

import pytest

import vramscope
from test_e2e import has_goodbye, report, report_json, start, stop_ok

STEPS = 20


def record(vs_bin, workdir, recorders, name, body):
    """Run ``body(sock)`` (training that watches and removes its watches) under a
    recorder; return the report's processes and the raw messages."""
    out, sock = os.path.join(workdir, name + ".jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    body(sock)
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)
    return report_json(vs_bin, out)["processes"], rec.messages(), out


def phases(step):
    return [(p["phase"], p["count"]) for p in step["phases"]]


def mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_no_optimizer_manual_sgd_counts_each_step(torch_mod, vs_bin, workdir, recorders):
    """Item 3: watch(model) with no optimizer and a manual update: a step ends at
    the model's next training forward after its backward, so 20 updates are
    20 steps, each with its phases; the zero_grad after the update is the tail
    of the step it follows, and an evaluation forward under no_grad is no phase."""
    torch = torch_mod
    model = mlp(torch)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def body(sock):
        h = vramscope.watch(model, socket=sock)
        for _ in range(STEPS):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad
            model.zero_grad()
            with torch.no_grad():
                model(x)
        h.remove()

    (proc,), msgs, _ = record(vs_bin, workdir, recorders, "noopt", body)
    assert proc["steps_total"] == STEPS
    assert [s["step"] for s in proc["steps"]] == list(range(STEPS))
    for s in proc["steps"]:
        assert phases(s) == [("forward", 1), ("loss", 1), ("backward", 1), ("zero_grad", 1)], s
    assert proc["anatomy"]["measured"]["weights"] == sum(
        p.numel() * p.element_size() for p in model.parameters())
    assert {m.get("model") for m in msgs if m["type"] == "phase"} == {"Sequential"}


def test_retained_graph_second_backward_in_every_step(torch_mod, vs_bin, workdir, recorders):
    """Item 4: loss.backward(retain_graph=True) then loss.backward() again:
    both are this step's backward in every step (one micro-step: no forward
    between them), not in step 0 only."""
    torch = torch_mod
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def body(sock):
        h = vramscope.watch(model, opt, socket=sock)
        for _ in range(STEPS):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward(retain_graph=True)
            loss.backward()
            opt.step()
        h.remove()

    (proc,), msgs, _ = record(vs_bin, workdir, recorders, "retain", body)
    assert proc["steps_total"] == STEPS
    for s in proc["steps"]:
        assert phases(s) == [("zero_grad", 1), ("forward", 1), ("loss", 1), ("backward", 2),
                             ("step", 1)], s
        assert s["micro"] == 1, s
    bw = [m for m in msgs if m["type"] == "phase" and m["name"] == "backward"
          and m["edge"] == "begin"]
    assert [(m["step"], m["micro"]) for m in bw] == [(s, 0) for s in range(STEPS) for _ in "ab"]


def gan(torch):
    g = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    d = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return g, d, torch.optim.Adam(g.parameters(), 1e-3), torch.optim.Adam(d.parameters(), 1e-3)


def test_gan_two_watches_named_one_phase_open_at_a_time(torch_mod, vs_bin, workdir, recorders):
    """Item 5: watch(G, opt_G, name="G") and watch(D, opt_D, name="D"). Each
    optimizer step is a step, named after the watch whose optimizer stepped:
    20 iterations are 20 D steps and 20 G steps, alternating. One automatic
    phase is open at a time (G's loss ends where D's forward begins); the
    backward of lossD is D's alone (G's output was detached: G gets none),
    and lossG's backward is one backward in G's step."""
    torch = torch_mod
    G, D, opt_g, opt_d = gan(torch)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)

    def body(sock):
        hg = vramscope.watch(G, opt_g, socket=sock, name="G")
        hd = vramscope.watch(D, opt_d, socket=sock, name="D")
        for _ in range(STEPS):
            real, z = torch.randn(8, 8), torch.randn(8, 4)
            opt_d.zero_grad()
            fake = G(z)
            loss_d = bce(D(real), ones) + bce(D(fake.detach()), zeros)
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = bce(D(fake), ones)
            loss_g.backward()
            opt_g.step()
        hd.remove()
        hg.remove()

    (proc,), msgs, out = record(vs_bin, workdir, recorders, "gan", body)
    assert proc["steps_total"] == 2 * STEPS
    assert [s["model"] for s in proc["steps"]] == ["D", "G"] * STEPS
    for s in proc["steps"]:
        if s["model"] == "D":  # G(z), D(real), D(fake.detach()): three forwards, one backward
            assert phases(s) == [("zero_grad", 1), ("forward", 3), ("loss", 3),
                                 ("backward", 1), ("step", 1)], s
        else:  # D(fake) inside G's step
            assert phases(s) == [("zero_grad", 1), ("forward", 1), ("loss", 1),
                                 ("backward", 1), ("step", 1)], s
    # One automatic phase open at a time: every begin follows the previous end.
    auto = [m for m in msgs if m["type"] == "phase" and not m["user"]]
    depth = 0
    for m in auto:
        depth += 1 if m["edge"] == "begin" else -1
        assert depth in (0, 1), m
    bw = [(m["step"], m["model"]) for m in auto if m["name"] == "backward" and m["edge"] == "begin"]
    assert len(bw) == 2 * STEPS
    assert [m for s, m in bw if s % 2 == 0] == ["D"] * STEPS, "lossD's backward is D's alone"
    text = report(vs_bin, out)
    assert "totals: 40 steps (D 20, G 20)" in text, text
    assert "    1 G  zero_grad" in text, "each step's name after its number:\n" + text
    csv = subprocess.run([vs_bin, "export", "--format", "csv", out], capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    col = csv[0].split(",").index("model")
    assert {(r.split(",")[5], r.split(",")[col]) for r in csv[1:]} == {
        (str(s), "DG"[s % 2]) for s in range(2 * STEPS)}
    same = subprocess.run([vs_bin, "diff", out, out], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    assert "40 steps: D 20, G 20" in same, same


def test_default_names_come_from_the_class_and_stay_unique(torch_mod):
    torch = torch_mod
    a, b = mlp(torch), mlp(torch)
    ha, hb = vramscope.watch(a), vramscope.watch(b)
    hc = vramscope.watch(torch.nn.Linear(2, 2), name="critic\x1b[31m")
    assert (ha.watcher.name, hb.watcher.name) == ("Sequential", "Sequential_2")
    assert hc.watcher.name == "critic?[31m", "no control character reaches the monitor"
    for bad in ("", "  ", 7):
        with pytest.raises(ValueError):
            vramscope.watch(mlp(torch), name=bad)
    for h in (ha, hb, hc):
        h.remove()


def _ddp_worker(rank, world, sock, init_file, steps):
    """One rank of test_ddp_spawn_ranks_come_from_torch_distributed (a
    module-level function: mp.spawn pickles it by name)."""
    import time

    import torch
    import torch.distributed as dist
    from vramscope import _api
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    h = vramscope.watch(model, opt, socket=sock)  # before the process group: no rank yet
    assert _api.current_client().hello["rank"] is None
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    deadline = time.monotonic() + 10
    while _api.current_client().hello["rank"] != rank and time.monotonic() < deadline:
        time.sleep(0.02)  # the sender asks torch.distributed within ~50 ms
    h.remove()
    dist.destroy_process_group()


def test_ddp_spawn_ranks_come_from_torch_distributed(torch_mod, vs_bin, workdir, recorders):
    """Item 6: torch.multiprocessing.spawn + init_process_group(rank=...) sets no
    RANK variable; the hook asks torch.distributed once it is initialised
    (on its sender thread) and sends its hello again, so the report shows
    ranks 0 and 1 of 2 (local rank null: mp.spawn gives none), each with its steps."""
    torch = torch_mod
    import torch.multiprocessing as mp
    if not torch.distributed.is_available():
        pytest.skip("this torch has no torch.distributed")
    init = os.path.join(workdir, "pg")

    def body(sock):
        mp.spawn(_ddp_worker, args=(2, sock, init, 5), nprocs=2, join=True)

    out, sock = os.path.join(workdir, "ddp.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    body(sock)
    rec.wait_for(lambda ms: sum(m["type"] == "goodbye" for m in ms) == 2, "both goodbyes")
    stop_ok_many(rec)
    procs = report_json(vs_bin, out)["processes"]
    assert sorted((p["rank"], p["world_size"], p["local_rank"]) for p in procs) == [
        (0, 2, None), (1, 2, None)]
    for p in procs:
        assert p["steps_total"] == 5 and [s["step"] for s in p["steps"]] == list(range(5))
        for s in p["steps"]:
            assert [q["phase"] for q in s["phases"]] == [
                "zero_grad", "forward", "loss", "backward", "step"], s
    text = report(vs_bin, out)
    assert "rank 0" in text and "rank 1" in text, text


def stop_ok_many(rec):
    code, err = rec.stop()
    assert code == 0, err
    assert " 0 bad messages;" in err.strip().splitlines()[-1], err


def _train_inputs(torch, model, make, sock, steps=4):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    h = vramscope.watch(model, opt, socket=sock)
    for _ in range(steps):
        opt.zero_grad()
        model(make()).float().pow(2).mean().backward()
        opt.step()
    h.remove()


def test_tokens_only_for_index_inputs_in_the_report(torch_mod, vs_bin, workdir, recorders):
    """Item 7: an 8x3x64x64 image batch is "batch 8" with no tokens, a 32x64
    float feature matrix "batch 32"; token ids (int64 4x16) are 64 tokens."""
    torch = torch_mod
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(4, 2))
    cases = [
        ("image", conv, lambda: torch.randn(8, 3, 64, 64), 8, None),
        ("features", torch.nn.Linear(64, 2), lambda: torch.randn(32, 64), 32, None),
        ("ids", torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 2)),
         lambda: torch.randint(0, 100, (4, 16)), 4, 64),
    ]
    for name, model, make, batch, tokens in cases:
        (proc,), msgs, out = record(vs_bin, workdir, recorders, name,
                                    lambda sock: _train_inputs(torch, model, make, sock))
        begins = [m["input"] for m in msgs if m["type"] == "phase" and m["name"] == "forward"
                  and m["edge"] == "begin"]
        assert begins == [{"batch": batch, "tokens": tokens}] * 4, name
        measured = proc["anatomy"]["measured"]
        assert measured["batch_size"] == batch and measured["activations_tokens"] == tokens, name
        text = report(vs_bin, out)
        # (a CPU run has a peak too, whose activations note names them again)
        said = sorted(set(re.findall(r"\d+ tokens", text)))
        assert said == (["%d tokens" % tokens] if tokens else []), text


def test_hello_sent_again_once_torch_distributed_answers(monitor):
    """Item 6, the client's half: the rank is asked on the sender thread until
    the probe answers, then the hello (same session, seq 0) is sent again on
    the open connection and kept for reconnects; a probe that raises is
    reported once and never asked again."""
    from conftest import make_config
    from vramscope import _client, _dist
    answer = {"v": None}
    calls = []

    def probe():
        calls.append(1)
        return answer["v"]

    c = _client.Client(make_config(socket=monitor.path), dist=probe, poll_interval=0.01)
    try:
        assert monitor.wait_for(lambda m: len(m.messages()) >= 1)
        assert wait_calls(calls, 3), "asked again while torch.distributed is not initialised"
        answer["v"] = {"rank": 1, "world_size": 2, "local_rank": None}
        assert monitor.wait_for(lambda m: len([x for x in m.messages() if x["type"] == "hello"]) == 2)
        first, again = [x for x in monitor.messages() if x["type"] == "hello"]
        assert (first["rank"], first["world_size"]) == (None, None)
        assert (again["rank"], again["world_size"], again["local_rank"]) == (1, 2, None)
        assert again["session"] == first["session"] and again["seq"] == 0
        assert c.hello["rank"] == 1 and c._dist is None, "asked no more, kept for reconnects"
    finally:
        c.close("removed", timeout=0.5)

    def broken():
        raise RuntimeError("no process group")

    with pytest.warns(RuntimeWarning, match="no process group"):
        c = _client.Client(make_config(), dist=broken, start=False)
    assert c._dist is None and c.hello["rank"] is None

    class NoDist:
        pass

    assert _dist.probe(NoDist()) is None


def wait_calls(calls, n, timeout=5):
    import time
    deadline = time.monotonic() + timeout
    while len(calls) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(calls) >= n
