"""Real Lightning: ``Trainer.fit`` on CPU with the callback and
with ``watch()`` in ``configure_optimizers``, against a real ``vramscope
record`` and ``report --json``. Each fit also runs without the hook: the
weights must be bit-identical and the output the same."""

import csv
import json
import os

import pytest

import lightning_fit
from conftest import FakeMonitor
from frameworks import Recording, lightning, need_attr, phase_counts, phase_order, quietly
from lightning_fit import BATCHES, CASES, LIGHTNING_ORDER, PAUSE, step_phases


def fit(torch, *args, **kwargs):
    """lightning_fit.fit with Lightning, or a skip where it is not installed."""
    return lightning_fit.fit(lightning(), torch, *args, **kwargs)


def check_fit(case, hook, layout, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    mode, kw = CASES[case]
    want, plain_warnings = quietly(fit, torch_mod, mode, None, layout=layout, **kw)
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = quietly(fit, torch_mod, mode, hook, sock=rec.sock, layout=layout, **kw)
    out = capfd.readouterr()
    assert got == want, "the hook changed the weights or the step count"
    assert hooked_warnings == plain_warnings, "the hook warned"
    text = out.out + out.err
    assert "vramscope:" not in text and "Traceback" not in text, text
    proc = rec.process()
    steps = want[1]
    assert proc["steps_total"] == steps, [phase_order(s) for s in proc["steps"]]
    micro = kw.get("accumulate_grad_batches", 1)
    every = kw.get("val_check_interval", BATCHES) // micro
    for s in proc["steps"]:
        counts = phase_counts(s)
        order, zeros = step_phases(s["step"], hook, layout, (s["step"] + 1) % every == 0)
        assert phase_order(s) == order, (case, s["step"], phase_order(s))
        assert sorted(counts) == sorted(order), (case, s["step"], phase_order(s))
        assert counts["step"] == 1 and counts["zero_grad"] == zeros, (s["step"], counts)
        assert counts["forward"] == counts["loss"] == counts["backward"] == micro, counts


@pytest.mark.parametrize("hook", ["callback", "watch"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("layout", ["self_call", "submodules"])
def test_lightning_fit(layout, case, hook, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    check_fit(case, hook, layout, torch_mod, vs_bin, workdir, recorders, capfd)


@pytest.mark.parametrize("layout", ["self_call", "submodules"])
def test_lightning_fit_of_a_compiled_module(layout, torch_mod, vs_bin, workdir, recorders,
                                            capfd):  # noqa: F811
    """trainer.fit(torch.compile(module)), Lightning's recipe: Lightning
    compiles the module's forward and training_step, so the hook's
    submodule, model and activation-meter hooks run inside compiled code.
    They stay out of it: the same weights and graph breaks (Lightning's own
    logging, three) as without the hook, where they broke the graph,
    recompiled it every step (13 graphs against 3) and, with the
    submodules layout, changed the weights; and every step still shows
    Lightning's five phases. One graph more at most: the sanity check
    compiled validation_step before the callback watched, and dynamo
    compiles it again once the model has forward hooks (its guard
    ``not self._forward_hooks``)."""
    torch = torch_mod
    need_attr(torch, "compile", "torch.compile")
    counters = torch._dynamo.utils.counters

    def fit_counted(*args, **kw):
        torch._dynamo.reset()
        counters.clear()
        result = fit(torch, "automatic", *args, layout=layout, compiled=True, **kw)
        graphs = dict(counters["stats"]), dict(counters["graph_break"])
        return result, graphs

    want, plain_warnings = quietly(fit_counted, None)
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = quietly(fit_counted, "callback", sock=rec.sock)
    capfd.readouterr()
    assert got[0] == want[0], "the hook changed the weights or the steps"
    (stats, breaks), (plain_stats, plain_breaks) = got[1], want[1]
    assert breaks == plain_breaks, breaks
    assert plain_stats["unique_graphs"] <= stats["unique_graphs"] <= plain_stats["unique_graphs"] + 1
    assert hooked_warnings == plain_warnings, "the hook warned"
    proc = rec.process()
    assert proc["steps_total"] == want[0][1] == BATCHES
    for s in proc["steps"]:
        order, _ = step_phases(s["step"], "callback", layout, s["step"] == BATCHES - 1)
        assert phase_order(s) == order, (s["step"], phase_order(s))


@pytest.mark.parametrize("case", ["automatic", "manual", "accumulation"])
@pytest.mark.parametrize("layout", ["loss_module", "labels", "functional"])
def test_lightning_layouts(layout, case, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    check_fit(case, "callback", layout, torch_mod, vs_bin, workdir, recorders, capfd)


@pytest.mark.parametrize("hook", ["callback", "watch"])
@pytest.mark.parametrize("layout", ["self_call", "submodules"])
def test_a_validation_between_micro_batches_is_an_evaluation_of_that_step(  # noqa: F811
        layout, hook, torch_mod, vs_bin, workdir, recorders, capfd):
    """accumulate_grad_batches=2 and a validation every 3 batches: after the
    first micro-batch of steps 1 and 4 Lightning validates inside the step,
    the gradients kept (training_epoch_loop.py zeroes them only where a
    step ended); after steps 2 and 5, between steps. Each validation is a
    user phase eval in the row of the step it falls in or follows, and
    each step keeps its two micro-steps (docs/hook.md, "An evaluation
    inside a step")."""
    kw = {"accumulate_grad_batches": 2, "val_check_interval": 3, "batches": 12}
    want, plain_warnings = quietly(fit, torch_mod, "automatic", None, layout=layout, **kw)
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = quietly(fit, torch_mod, "automatic", hook, sock=rec.sock,
                                   layout=layout, **kw)
    out = capfd.readouterr()
    assert got == want and got[1] == 6, "the hook changed the weights or the step count"
    assert hooked_warnings == plain_warnings, "the hook warned"
    assert "vramscope:" not in out.out + out.err
    proc = rec.process()
    assert proc["steps_total"] == 6, [phase_order(s) for s in proc["steps"]]
    for s in proc["steps"]:
        counts = phase_counts(s)
        assert counts["forward"] == counts["loss"] == counts["backward"] == 2, (s["step"], counts)
        if s["step"] in (1, 4):
            inside = ["forward", "loss", "zero_grad", "backward", "eval", "step"]
            assert phase_order(s) == inside, (s["step"], phase_order(s))
            assert counts["eval"] == 1, counts
        elif s["step"] in (2, 5):
            assert phase_order(s) == LIGHTNING_ORDER + ["eval"], (s["step"], phase_order(s))
        elif s["step"] == 3:
            assert phase_order(s) == LIGHTNING_ORDER, (s["step"], phase_order(s))


def phase_durations(path):
    """{(step, micro, phase): seconds} of the automatic phases in a recording,
    from the hook's own edge times."""
    began, took = {}, {}
    with open(path) as f:
        next(f)
        for line in f:
            m = json.loads(line).get("msg") or {}
            if m.get("type") != "phase" or m.get("user"):
                continue
            key = (m["step"], m["micro"], m["name"])
            if m["edge"] == "begin":
                began[key] = m["t"]
            elif key in began:
                took[key] = m["t"] - began.pop(key)
    return took


def test_forward_ends_where_the_models_computation_ends(torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    """training_step calls two submodules, computes its loss, then updates a
    metric module; the last submodule and the loss computation each sleep
    PAUSE: forward holds the first, loss the second (the metric, whose
    output needs no gradient, moves nothing)."""
    rec = Recording(vs_bin, workdir, recorders)
    fit(torch_mod, "automatic", "callback", sock=rec.sock, layout="slow_loss", slow=True)
    rec.process()  # stops the recorder: the file holds every edge
    took = phase_durations(rec.out)
    for step in range(BATCHES):
        fwd, loss = took[(step, 0, "forward")], took[(step, 0, "loss")]
        # Lower bounds only (a loaded machine stretches either): ended at
        # the first submodule, forward would miss the slow one; ended at
        # training_step's return, loss would be short.
        assert fwd >= PAUSE and loss >= PAUSE, (step, took)


def update_ends(path):
    """{step: (peak, held)} of each step's edges up to its update's end
    (the ``step`` end edge), and the steps a later ``zero_grad`` ends
    (Lightning zeroes the gradients before a validation), from a recording."""
    figures, ended, tails = {}, set(), set()
    with open(path) as f:
        next(f)
        for line in f:
            m = json.loads(line).get("msg") or {}
            if m.get("type") != "phase" or m.get("user") or not m.get("mem"):
                continue
            step, mem = m["step"], m["mem"]
            if step in ended:
                tails.add(step)
                continue
            peak = max(figures.get(step, (0, 0))[0], mem["max_allocated"])
            figures[step] = (peak, mem["allocated"])
            if m["name"] == "step" and m["edge"] == "end":
                ended.add(step)
    return figures, tails


def test_figures_in_the_users_csv_log(torch_mod, vs_bin, workdir, recorders):  # noqa: F811
    """VramscopeCallback(log_figures=True) logs each step's peak, held memory
    and the need through the Trainer's logger: the same bytes as vramscope's
    own report of the same run. Off by default: the log has none. A step
    that Lightning's zero_grad before the validation ends (the last) is
    read once more in the report, after that zero_grad, which the logger,
    called at the update's end, cannot wait for: its figures are the
    step's reads up to the update's end (docs/integrations.md)."""
    L = lightning()
    logs = {}
    for on in (False, True):
        rec = Recording(vs_bin, workdir, recorders, name="csv%d" % on)
        logger = L.pytorch.loggers.CSVLogger(workdir, name="csv%d" % on)
        fit(torch_mod, "automatic", "callback", sock=rec.sock, callback_kw={"log_figures": on},
            logger=logger, log_every_n_steps=1, layout="submodules")
        with open(os.path.join(logger.log_dir, "metrics.csv")) as f:
            logs[on] = list(csv.DictReader(f))
        proc = rec.process()
    assert not any(k.startswith("vramscope") for row in logs[False] for k in row), logs[False][0]
    rows = {int(r["step"]): r for r in logs[True] if r.get("vramscope/step_peak_allocated")}
    assert sorted(rows) == list(range(BATCHES)), logs[True]
    assert proc["memory"]["peaks"] == "exact", proc["memory"]
    at_update, tails = update_ends(rec.out)
    assert tails == {BATCHES - 1}, tails  # the epoch's validation follows the last step
    need = 0
    for s in proc["steps"]:
        row = rows[s["step"]]
        assert s["peak_known"] == "exact", s
        peak, held = s["peak_allocated"], s["held"]
        if s["step"] in tails:
            peak, held = at_update[s["step"]]
        assert float(row["vramscope/step_peak_allocated"]) == peak, (row, s)
        assert float(row["vramscope/held_allocated"]) == held, (row, s)
        need = peak if s["step"] <= 1 else max(need, peak)
        assert float(row["vramscope/need_allocated"]) == need, (row, s)
        assert float(row["vramscope/need_exact"]) == 1.0, row


@pytest.mark.parametrize("hook", ["callback", "watch"])
@pytest.mark.parametrize("case,layout", [("validation", "submodules"),
                                         ("accumulation", "submodules"),
                                         ("bf16-mixed", "submodules"),
                                         ("automatic", "self_call"),
                                         ("automatic", "functional")])
def test_the_fast_paths_send_what_the_general_paths_send(case, layout, hook, torch_mod, workdir):
    """The same fit twice, once with the watch's fast paths turned off: the
    same phase edges, step by step (their times and reads aside), with the
    callback and with watch() in configure_optimizers. The steps at rest
    take them (docs/hook.md, "Lightning's steps")."""
    L = lightning()  # skips where Lightning is not installed
    from vramscope.integrations.lightning import VramscopeCallback

    class Counting(L.Callback):
        """After the watch's own callback: its fast paths on or off, and
        whether each batch ended with the loop at rest."""

        def __init__(self, fast, watched):
            self.fast, self.watched, self.taken = fast, watched, []

        def on_train_start(self, trainer, pl_module):
            self.watched(pl_module)._fast_loop = self.fast

        def on_train_batch_end(self, trainer, pl_module, *args):
            self.taken.append(self.watched(pl_module)._fast)

    mode, kw = CASES[case]
    micro = kw.get("accumulate_grad_batches", 1)
    steps = 8
    edges, taken = {}, {}
    for fast in (True, False):
        mon = FakeMonitor(os.path.join(workdir, "m%d.sock" % fast)).start()
        cb = VramscopeCallback(socket=mon.path) if hook == "callback" else None
        counting = Counting(fast, (lambda m: cb._vramscope.watcher) if cb is not None
                            else (lambda m: m.handle.watcher))
        try:
            fit(torch_mod, mode, hook, sock=mon.path, layout=layout, callback=cb,
                batches=steps * micro, extra_callbacks=[counting], **kw)
            assert mon.wait_for(lambda m: any(x.get("type") == "goodbye" for x in m.messages()))
            edges[fast] = [(m["name"], m["edge"], m["step"], m.get("micro"), m.get("input"),
                            m.get("user", False)) for m in mon.messages()
                           if m.get("type") == "phase"]
        finally:
            mon.stop()
        taken[fast] = counting.taken
    assert edges[True] == edges[False]
    assert len(edges[True]) > 10 * steps, edges[True]
    assert not any(taken[False])
    # (steps 0-2 are measured, and a validation leaves the rest state)
    assert sum(taken[True]) >= (steps - 4) * micro, taken[True]
