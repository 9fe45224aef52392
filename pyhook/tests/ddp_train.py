"""A two-process training script with no vramscope in it, for
test_fw_launch.py: ``torchrun --nproc-per-node 2 ddp_train.py ddp`` (DDP over
gloo) or ``accelerate launch ... ddp_train.py accelerate``. Each rank prints
its rank, its optimizer steps and a hash of its final weights."""

import hashlib
import sys

import torch

STEPS, ACCUMULATION = 3, 2


def weights_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(repr(p.detach().flatten().tolist()).encode())
    return h.hexdigest()[:16]


def say(rank, done, net):
    # One write: the two ranks share the pipe.
    sys.stdout.write("rank %d steps %d result %s\n" % (rank, done, weights_hash(net)))
    sys.stdout.flush()


def batches(rank):
    g = torch.Generator().manual_seed(10 + rank)
    for _ in range(STEPS * ACCUMULATION):
        yield torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def accumulate(model, opt, rank):
    """Train with ACCUMULATION micro-batches a step; return the optimizer steps."""
    done = 0
    for i, (x, y) in enumerate(batches(rank)):
        loss = torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATION
        loss.backward()
        if (i + 1) % ACCUMULATION == 0:
            opt.step()
            opt.zero_grad()
            done += 1
    return done


def ddp_model():
    """(the module, DDP around it, SGD over it), from seed 0 (a process group is up)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = torch.nn.parallel.DistributedDataParallel(net)
    return net, model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def ddp():
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net, model, opt = ddp_model()
    say(rank, accumulate(model, opt, rank), net)
    dist.destroy_process_group()


def accelerate_loop():
    from accelerate import Accelerator
    acc = Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    model, opt = acc.prepare(net, opt)
    done = 0
    for x, y in batches(acc.process_index):
        with acc.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            acc.backward(loss)
            if acc.sync_gradients:
                done += 1
            opt.step()
            opt.zero_grad()
    say(acc.process_index, done, net)
    acc.end_training()


if __name__ == "__main__":
    {"ddp": ddp, "accelerate": accelerate_loop}[sys.argv[1]]()
