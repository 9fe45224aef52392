"""One rank of a two-rank gloo training, for test_fw_distributed.py:
``python dist_stacks.py STACK SOCKET`` with ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` set. STACK is

* ``fsdp2``: ``torch.distributed.fsdp.fully_shard`` on each layer and on the
  model, AdamW on the sharded (DTensor) parameters;
* ``ddp_no_sync``: DDP, gradient accumulation with ``no_sync()`` on every
  micro-batch but the last;
* ``lightning:LAYOUT:HOOK:CASE``: Lightning's ``Trainer`` with
  ``strategy="ddp"`` on two CPU devices (lightning_fit.fit), the rank
  found from ``LOCAL_RANK`` as torchrun sets it; HOOK is ``callback`` or
  ``watch`` (watch() in ``configure_optimizers``);
* ``hf_trainer``: transformers' ``Trainer`` (which wraps the model in DDP
  and zeroes the gradients through that wrapper) with ``VramscopeCallback``,
  a one-layer GPT-2 built from its config, HF_TRAINER_ACCUMULATION
  micro-batches a step and an evaluation every 2 steps.

Each rank trains twice from the same seed: without vramscope, then with
``vramscope.watch(model, optimizer, socket=SOCKET)`` (or the Lightning
hook), and prints one line:
its rank, the optimizer steps of each run, a hash of each run's final local
weights, and the warnings the watched run raised that the plain one did not.
"""

import hashlib
import json
import sys
import warnings

import torch
import torch.distributed as dist

import ddp_train
import loops
from ddp_train import ACCUMULATION, STEPS, batches  # noqa: F401 - STEPS: read here by the test


def local_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        t = p.detach()
        t = t.to_local() if hasattr(t, "to_local") else t
        h.update(repr(t.flatten().tolist()).encode())
    return h.hexdigest()[:16]


def fsdp2(rank, watch):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = loops.mlp(torch)
    for layer in (model[0], model[2]):
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    handle = watch(model, opt)
    return handle, ddp_train.accumulate(model, opt, rank), local_hash(model)


def ddp_no_sync(rank, watch):
    net, model, opt = ddp_train.ddp_model()
    handle = watch(model, opt)
    done = 0
    for i, (x, y) in enumerate(batches(rank)):
        last = (i + 1) % ACCUMULATION == 0
        if last:
            loss = torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATION
            loss.backward()  # the gradients are all-reduced here
            opt.step()
            opt.zero_grad()
            done += 1
        else:
            with model.no_sync():
                loss = torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATION
                loss.backward()
    return handle, done, local_hash(net)


# Lightning's fits: batches for both ranks, so that each rank takes
# LIGHTNING_STEPS optimizer steps of its share (Lightning's DistributedSampler).
LIGHTNING_STEPS = 6


def lightning_ddp(layout, hook, case, sock):
    """Each rank's (steps, hash, warnings) of a plain and a hooked fit."""
    import lightning
    import lightning_fit
    lightning_fit.quiet_logs()
    mode, kw = lightning_fit.CASES[case]
    batches = 2 * LIGHTNING_STEPS * kw.get("accumulate_grad_batches", 1)
    out = []
    for h in (None, hook):
        (digest, done), caught = warned(lightning_fit.fit, lightning, torch, mode, h, sock=sock,
                                        layout=layout, batches=batches, devices=2,
                                        strategy="ddp", **kw)
        out.append((done, digest, caught))
    return out


HF_TRAINER_STEPS, HF_TRAINER_ACCUMULATION = 4, 2


def hf_trainer(sock, outdir):
    """Each rank's (steps, hash, warnings) of a plain and a hooked Trainer.train."""
    import transformers

    import hf_fit
    out = []
    for hooked in (False, True):
        callbacks = []
        if hooked:
            from vramscope.integrations.transformers import VramscopeCallback
            callbacks.append(VramscopeCallback(socket=sock))
        (digest, done), caught = hf_fit.train(
            transformers, torch, outdir, callbacks, HF_TRAINER_STEPS, HF_TRAINER_ACCUMULATION,
            2, ranks=2, printer=False, ddp_backend="gloo")
        out.append((done, digest, {"%s: %s" % w for w in caught}))
    return out


def warned(fn, *args, **kwargs):
    """What ``fn(*args, **kwargs)`` returns, and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, {"%s: %s" % (w.category.__name__, w.message) for w in caught}


def run(fn, rank, watch):
    def train():
        handle, done, digest = fn(rank, watch)
        if handle is not None:
            handle.remove()
        return done, digest
    (done, digest), caught = warned(train)
    return done, digest, caught


def main(stack, sock):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if stack.startswith("lightning:"):
        plain, hooked = lightning_ddp(*stack.split(":")[1:], sock)
    elif stack == "hf_trainer":
        import os
        plain, hooked = hf_trainer(sock, os.path.join(os.path.dirname(sock), "hf%d" % rank))
    else:
        fn = {"fsdp2": fsdp2, "ddp_no_sync": ddp_no_sync}[stack]
        plain = run(fn, rank, lambda m, o: None)
        import vramscope
        hooked = run(fn, rank, lambda m, o: vramscope.watch(m, o, socket=sock))
    sys.stdout.write(json.dumps({
        "rank": rank, "steps": [plain[0], hooked[0]], "hash": [plain[1], hooked[1]],
        "warned": sorted(hooked[2] - plain[2])}) + "\n")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
