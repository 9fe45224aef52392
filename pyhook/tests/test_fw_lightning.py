"""Real Lightning: ``Trainer.fit`` on CPU with the callback and
with ``watch()`` in ``configure_optimizers``, against a real ``vramscope
record`` and ``report --json``. Each fit also runs without the hook: the
weights must be bit-identical and the output the same."""

import hashlib
import logging
import warnings

import pytest

import vramscope
from frameworks import PHASES, Recording, need, phase_counts, phase_order

BATCHES = 6


def weights_hash(module):
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(repr(p.detach().float().flatten().tolist()).encode())
    return h.hexdigest()[:16]


def make_module(L, torch, manual, watch_sock):
    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                           torch.nn.Linear(32, 4))
            self.automatic_optimization = not manual
            self.handle = None

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            if manual:
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(loss)
                opt.step()
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
            if watch_sock is not None:
                self.handle = vramscope.watch(self, opt, socket=watch_sock)
            return opt

    return Tiny()


def fit(torch, mode, hook, sock=None, **trainer_kw):
    L = need("lightning")
    # Lightning's info lines go to a handler bound to the stderr of the first
    # test that imported it (a closed capture later on): kept quiet.
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8 * BATCHES, 16),
                                          torch.randint(0, 4, (8 * BATCHES,)))
    train = torch.utils.data.DataLoader(data, batch_size=8)
    val = torch.utils.data.DataLoader(data, batch_size=8)
    module = make_module(L, torch, manual=(mode == "manual"),
                         watch_sock=sock if hook == "watch" else None)
    callbacks = []
    if hook == "callback":
        from vramscope.integrations.lightning import VramscopeCallback
        callbacks.append(VramscopeCallback(socket=sock))
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks,
                        limit_val_batches=2, num_sanity_val_steps=1, **trainer_kw)
    trainer.fit(module, train, val)
    if module.handle is not None:
        module.handle.remove()
    return weights_hash(module), trainer.global_step


def quietly(fn, *args, **kw):
    """fn's result and the set of warnings it raised (each kind once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kw)
    return result, {(w.category.__name__, str(w.message)) for w in caught}


CASES = {
    "automatic": ("automatic", {}),
    "manual": ("manual", {}),
    "accumulation": ("automatic", {"accumulate_grad_batches": 3}),
    "validation": ("automatic", {"val_check_interval": 2}),
    "bf16-mixed": ("automatic", {"precision": "bf16-mixed"}),
}


@pytest.mark.parametrize("hook", ["callback", "watch"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_lightning_fit(case, hook, torch_mod, vs_bin, workdir, recorders, capfd):  # noqa: F811
    mode, kw = CASES[case]
    want, plain_warnings = quietly(fit, torch_mod, mode, None, **kw)
    capfd.readouterr()
    rec = Recording(vs_bin, workdir, recorders)
    got, hooked_warnings = quietly(fit, torch_mod, mode, hook, sock=rec.sock, **kw)
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
        # Lightning zeroes the gradients before each validation
        # (on_validation_model_zero_grad): after the step it follows.
        zeros = 1 + ((s["step"] + 1) % every == 0)
        want = sorted(PHASES)
        if hook == "watch" and s["step"] == 0:
            # watch() in configure_optimizers runs before the Trainer's
            # model.zero_grad() and the sanity check: that zero_grad heads
            # step 0, and the check's no_grad forwards show in it as "eval"
            # (docs/integrations.md). The callback watches after both.
            want, zeros = sorted(PHASES + ["eval"]), zeros + 1
        assert sorted(counts) == want, (case, s["step"], phase_order(s))
        assert counts["step"] == 1 and counts["zero_grad"] == zeros, (s["step"], counts)
        assert counts["forward"] == counts["backward"] == micro, counts

