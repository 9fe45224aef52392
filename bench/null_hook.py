"""The floor under any hook with the watch's entries: a hook that enters
where the watch does and only takes the time there, with one allocator
read and one peak reset at each step's end (the watch's plain step reads
once). What a plain step costs above it is what the watch's own work
costs; what it costs above a step without any hook, no Python hook with
these entries can avoid.

Entries, as the watch has them on torch 1.13 (bench/hook_ops.py lists
the watch's): the model's forward pre-hook and forward hook, the
optimizer's ``zero_grad`` and ``step`` patched on the instance, and
``torch.autograd.backward`` wrapped process-wide (``Tensor.backward``
calls it by its module attribute)."""

from time import monotonic


def install(torch, model, opt, device=0):
    """Hook ``model`` and ``opt``; return the undo. The times go to a list
    kept to 512 entries (the watch's queue is drained by its sender)."""
    log = []
    stats, reset = torch._C._cuda_memoryStats, torch._C._cuda_resetPeakMemoryStats

    def pre(module, args):
        log.append(monotonic())

    def post(module, args, output):
        log.append(monotonic())

    handles = [model.register_forward_pre_hook(pre), model.register_forward_hook(post)]
    zero_grad, step = opt.zero_grad, opt.step

    def zero(*args, **kwargs):
        log.append(monotonic())
        try:
            return zero_grad(*args, **kwargs)
        finally:
            log.append(monotonic())

    def stepped(*args, **kwargs):
        log.append(monotonic())
        try:
            return step(*args, **kwargs)
        finally:
            raw = stats(device)
            reset(device)
            log.append((monotonic(), raw))
            if len(log) > 512:
                del log[:]

    opt.zero_grad, opt.step = zero, stepped
    backward = torch.autograd.backward

    def wrapped(*args, **kwargs):
        log.append(monotonic())
        try:
            return backward(*args, **kwargs)
        finally:
            log.append(monotonic())

    torch.autograd.backward = wrapped

    def undo():
        for h in handles:
            h.remove()
        del opt.zero_grad, opt.step
        torch.autograd.backward = backward
    return undo
