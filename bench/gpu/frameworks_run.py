#!/usr/bin/env python3
"""Real framework training on a GPU, with or without vramscope's callback,
printing the user's own allocator counters after every optimizer update.

    python3 bench/gpu/frameworks_run.py --fw hf|hf-ckpt|lightning [--hook] [--steps 60]

- ``hf``: transformers' ``Trainer`` on a 4-layer GPT-2 (its config, random
  weights and tokens: nothing is downloaded), batch 16 of 128 tokens,
  ``gradient_accumulation_steps=2``, bf16, AdamW, evaluation every 20 steps.
  ``hf-ckpt``: the same with ``gradient_checkpointing=True``.
- ``lightning``: a ``LightningModule`` of Lightning's README layout
  (``training_step`` calls ``self.encoder`` and ``self.decoder``), a
  4096-wide MLP, ``accumulate_grad_batches=2``, ``precision="bf16-mixed"``,
  Adam, validation every 20 batches.

Each update prints ``step N allocated A max_allocated M reserved R`` from a
callback after vramscope's (after the update, and the Trainer's zero_grad),
then ``weights digest D``. Deterministic algorithms are on, so the weights
are bit-identical with and without the hook. ``--hook`` adds
``VramscopeCallback()`` (the socket from ``VRAMSCOPE_SOCKET``).
"""
import argparse
import os
import tempfile
import warnings

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402


CPU = False  # --cpu: a smoke test where there is no GPU (counters read 0)


def counters(step):
    if CPU:
        print("step %d allocated 0 max_allocated 0 reserved 0" % step, flush=True)
        return
    torch.cuda.synchronize()
    print("step %d allocated %d max_allocated %d reserved %d" % (
        step, torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(),
        torch.cuda.memory_reserved()), flush=True)


def digest(model):
    print("weights digest %.10e" % sum(p.detach().double().sum().item() for p in model.parameters()), flush=True)


def hf(args, ckpt):
    import transformers as T

    class Prints(T.TrainerCallback):
        def on_step_end(self, a, state, control, **kw):
            counters(state.global_step - 1)

        def on_evaluate(self, a, state, control, **kw):
            print("evaluated after step %d" % (state.global_step - 1), flush=True)

    cfg = T.GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=128)
    T.enable_full_determinism(0)  # before the weights are drawn
    model = T.GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, cfg.vocab_size, (32 * 8, 128), generator=g)
    data = [{"input_ids": t, "labels": t} for t in tokens]
    out = tempfile.mkdtemp(prefix="vs-hf-")
    ta = T.TrainingArguments(
        output_dir=out, per_device_train_batch_size=16, per_device_eval_batch_size=16,
        gradient_accumulation_steps=2, max_steps=args.steps, bf16=not CPU, use_cpu=CPU, learning_rate=3e-4,
        eval_strategy="steps", eval_steps=20, logging_steps=20, save_strategy="no",
        report_to=[], seed=0, full_determinism=True, dataloader_num_workers=0,
        gradient_checkpointing=ckpt, disable_tqdm=True)
    callbacks = []
    if args.hook:
        from vramscope.integrations.transformers import VramscopeCallback
        callbacks.append(VramscopeCallback())
    callbacks.append(Prints())
    trainer = T.Trainer(model=model, args=ta, train_dataset=data, eval_dataset=data[:32],
                        callbacks=callbacks)
    trainer.train()
    digest(model)


def lightning(args):
    import lightning as L

    class Lit(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                               torch.nn.Linear(4096, 4096), torch.nn.GELU())
            self.decoder = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                                               torch.nn.Linear(4096, 10))

        def training_step(self, batch, i):
            x, y = batch
            z = self.encoder(x)
            return torch.nn.functional.cross_entropy(self.decoder(z), y)

        def validation_step(self, batch, i):
            x, y = batch
            self.log("val_loss", torch.nn.functional.cross_entropy(self.decoder(self.encoder(x)), y))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-4)

    class Prints(L.Callback):
        last = -1

        def on_train_batch_end(self, trainer, *a):
            if trainer.global_step - 1 != self.last:  # an update ran in this batch
                self.last = trainer.global_step - 1
                counters(self.last)

        def on_validation_end(self, trainer, *a):
            if not trainer.sanity_checking:
                print("evaluated after step %d" % (trainer.global_step - 1), flush=True)

    L.seed_everything(0, verbose=False)
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(1)
    n = 2 * args.steps * 64
    data = torch.utils.data.TensorDataset(torch.randn(n, 1024, generator=g), torch.randint(0, 10, (n,), generator=g))
    val = torch.utils.data.TensorDataset(torch.randn(256, 1024, generator=g), torch.randint(0, 10, (256,), generator=g))
    callbacks = []
    if args.hook:
        from vramscope.integrations.lightning import VramscopeCallback
        callbacks.append(VramscopeCallback())
    callbacks.append(Prints())
    model = Lit()
    trainer = L.Trainer(max_steps=args.steps, accelerator="cpu" if CPU else "gpu", devices=1,
                        precision="32" if CPU else "bf16-mixed",
                        accumulate_grad_batches=2, val_check_interval=40, check_val_every_n_epoch=None,
                        limit_val_batches=4,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=callbacks, deterministic=True)
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=64),
                torch.utils.data.DataLoader(val, batch_size=64))
    digest(model)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fw", required=True, choices=["hf", "hf-ckpt", "lightning"])
    ap.add_argument("--hook", action="store_true")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--cpu", action="store_true", help="a smoke test without a GPU")
    args = ap.parse_args()
    global CPU
    CPU = args.cpu
    warnings.simplefilter("ignore")
    if args.fw == "lightning":
        lightning(args)
    else:
        hf(args, args.fw == "hf-ckpt")


if __name__ == "__main__":
    main()
