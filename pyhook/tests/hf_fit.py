"""The transformers ``Trainer.train`` of the real-framework tests
(test_fw_transformers.py, and each rank of test_fw_distributed.py's
two-rank Trainer): a tiny GPT-2 built from its config (no download),
trained on CPU with gradient accumulation and an evaluation every few
steps."""

import hashlib
import os
import warnings


def weights_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(repr(p.detach().flatten().tolist()).encode())
    return h.hexdigest()[:16]


def train(transformers, torch, outdir, callbacks, steps, accumulation, eval_every, ranks=1,
          state=None, printer=True, **args_kw):
    """Train ``steps`` optimizer steps of ``accumulation`` micro-batches of
    4 (on ``ranks`` ranks, each its share of the rows) from seed 0; return
    ((weights' hash, global step), the warnings raised as (category,
    message) pairs). ``printer``: False takes the Trainer's PrinterCallback
    out (stdout is then the caller's)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1,
                                     n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(1)
    rows = [{"input_ids": t, "labels": t}
            for t in torch.randint(0, 64, (ranks * 4 * steps * accumulation, 12), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=outdir, per_device_train_batch_size=4, per_device_eval_batch_size=4,
        gradient_accumulation_steps=accumulation, max_steps=steps, eval_strategy="steps",
        eval_steps=eval_every, save_strategy="no", report_to=[], use_cpu=True,
        disable_tqdm=True, seed=0, learning_rate=1e-3,
        **dict({"logging_strategy": "no"}, **args_kw))
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows,
                                   eval_dataset=rows[:8], callbacks=callbacks)
    if not printer:
        trainer.remove_callback(transformers.PrinterCallback)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    if state is not None:
        state.append(trainer.state)
    return (weights_hash(model), trainer.state.global_step), \
        {(w.category.__name__, str(w.message)) for w in caught}
