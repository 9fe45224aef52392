#!/usr/bin/env python3
"""What the hook runs per optimizer step under the loops people train with:
its Python frames and bytecode instructions (sys.settrace, per opcode,
nothing timed), for a loop of one's own calling ``model(x)``, the same
loop with a transformers-shaped model (``model(**batch).loss``), one
driven by accelerate (``Accelerator.prepare``, ``accelerator.backward``),
transformers' ``Trainer`` with the callback (a tiny GPT-2 built from its
config), Lightning's ``Trainer`` with the callback (the README's
layout: ``training_step`` calls the submodules) and with ``watch()`` in
``configure_optimizers`` instead, and a Fabric loop. All on CPU, the host's
RSS read (the Trainers' own device here); bench/hook_ops.py counts the
first two on the simulated GPU allocator.

Each loop runs twice, for N and 3N optimizer steps, and the difference
is divided by 2N: what one step costs once past the first steps. A
framework that is not installed is skipped (the torch-2 test venv has
both: pyhook/requirements-torch2.txt).

    PYTHONPATH=pyhook python3 bench/framework_ops.py [--steps 20] [LOOP ...]
"""

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import shapes  # noqa: E402


def own_loop(torch, vramscope, steps, hf):
    body = shapes.mlp(torch)
    model = shapes.lm_head(torch, body) if hf else body
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    handle = vramscope.watch(model, opt, socket=socket_path(), sample_hz=0)

    def run():
        for _ in range(steps):
            opt.zero_grad()
            if hf:
                model(input_ids=x, labels=y).loss.backward()
            else:
                torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return run, handle.remove


def prepared_loop(torch, vramscope, steps, prepare, backward):
    """A loop of one's own through a framework's wrappers: ``prepare(model,
    optimizer)`` gives what the loop trains, ``backward(loss)`` is its
    backward."""
    body = shapes.mlp(torch)
    model, opt = prepare(body, torch.optim.SGD(body.parameters(), lr=1e-3, momentum=0.9))
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    handle = vramscope.watch(model, opt, socket=socket_path(), sample_hz=0)

    def run():
        for _ in range(steps):
            opt.zero_grad()
            backward(torch.nn.functional.cross_entropy(model(x), y))
            opt.step()
    return run, handle.remove


def accelerate_loop(torch, vramscope, steps):
    import accelerate
    acc = accelerate.Accelerator(cpu=True)
    return prepared_loop(torch, vramscope, steps, acc.prepare, acc.backward)


def hf_trainer(torch, vramscope, steps):
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers
    transformers.logging.set_verbosity_error()
    from vramscope.integrations.transformers import VramscopeCallback
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1,
                                     n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(1)
    rows = [{"input_ids": t, "labels": t}
            for t in torch.randint(0, 64, (4 * steps, 12), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, max_steps=steps,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, seed=0,
        logging_strategy="no", learning_rate=1e-3)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows,
                                   callbacks=[VramscopeCallback(socket=socket_path(),
                                                                sample_hz=0)])
    return trainer.train, None


def lightning_trainer(torch, vramscope, steps, callback=True):
    L = lightning()
    from vramscope.integrations.lightning import VramscopeCallback

    data = torch.utils.data.TensorDataset(torch.randn(16 * steps, 256),
                                          torch.randint(0, 10, (16 * steps,)))
    handles = []
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False,
                        callbacks=[VramscopeCallback(socket=socket_path(), sample_hz=0)]
                        if callback else [])
    model = shapes.lightning_module(L, torch, None if callback else (
        lambda module, opt: handles.append(
            vramscope.watch(module, opt, socket=socket_path(), sample_hz=0))))

    def undo():
        for h in handles:
            h.remove()

    return (lambda: trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=16))), undo


def fabric_loop(torch, vramscope, steps):
    L = lightning()
    fabric = L.Fabric(accelerator="cpu", devices=1)
    return prepared_loop(torch, vramscope, steps, fabric.setup, fabric.backward)


def lightning():
    """Lightning (``lightning``, else ``pytorch_lightning``), its info lines off."""
    try:
        import lightning as L
    except ImportError:
        import pytorch_lightning as L
    logging.disable(logging.WARNING)
    return L


def socket_path():
    return os.path.join(tempfile.mkdtemp(), "none.sock")  # nothing listens


LOOPS = {
    "own-loop": lambda torch, vs, n: own_loop(torch, vs, n, False),
    "own-loop-hf-model": lambda torch, vs, n: own_loop(torch, vs, n, True),
    "accelerate": accelerate_loop,
    "hf-trainer": hf_trainer,
    "lightning": lightning_trainer,
    "lightning-watch": lambda torch, vs, n: lightning_trainer(torch, vs, n, callback=False),
    "fabric": fabric_loop,
}
NEEDS = {"accelerate": "accelerate", "hf-trainer": "transformers", "lightning": "lightning",
         "lightning-watch": "lightning", "fabric": "lightning"}


def count(torch, vramscope, make, steps):
    """(opcodes, frames) of the hook's Python while ``make``'s loop runs ``steps``."""
    torch.manual_seed(0)
    run, undo = make(torch, vramscope, steps)
    pkg = os.path.dirname(vramscope.__file__)
    ops = frames = 0

    def tracer(frame, event, arg):
        nonlocal ops, frames
        if not frame.f_code.co_filename.startswith(pkg):
            return tracer
        if event == "call":
            frames += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            ops += 1
        return tracer

    sys.settrace(tracer)
    try:
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), \
                contextlib.redirect_stderr(quiet):  # the Trainers' own summaries
            run()
    finally:
        sys.settrace(None)
        if undo is not None:
            undo()
    return ops, frames


def installed(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None or (
        name == "lightning" and importlib.util.find_spec("pytorch_lightning") is not None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("loops", nargs="*", metavar="LOOP", help="of %s (default: all)"
                    % ", ".join(LOOPS))
    args = ap.parse_args()
    for name in args.loops:
        if name not in LOOPS:
            ap.error("unknown loop %r (of %s)" % (name, ", ".join(LOOPS)))
    args.loops = args.loops or list(LOOPS)
    warnings.simplefilter("ignore")  # nothing listens; the frameworks' own notices
    import torch
    import vramscope
    torch.set_num_threads(1)
    print("the hook's Python per optimizer step (Python %d.%d, torch %s; %d and %d steps)"
          % (sys.version_info[0], sys.version_info[1], torch.__version__, args.steps,
             3 * args.steps))
    for name in args.loops:
        need = NEEDS.get(name)
        if need is not None and not installed(need):
            print("  %-20s skipped: %s is not installed" % (name, need))
            continue
        a = count(torch, vramscope, LOOPS[name], args.steps)
        b = count(torch, vramscope, LOOPS[name], 3 * args.steps)
        n = 2 * args.steps
        print("  %-20s %6.0f opcodes in %5.1f frames" % (name, (b[0] - a[0]) / n,
                                                         (b[1] - a[1]) / n))


if __name__ == "__main__":
    main()
