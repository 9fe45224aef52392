"""Training loops as people write them, run on real torch by
test_loop_shapes.py: in the test process with an explicit ``watch()``, and as
a script under ``vramscope run`` (auto-attach, no code change).

Each loop returns its own count of optimizer steps and a hash of the final
parameters, so a run with the hook can be compared bit for bit with one
without it. Run as a script: ``python loops.py SHAPE`` prints both.
"""

import hashlib
import sys


def param_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(repr(p.detach().flatten().tolist()).encode())
    return h.hexdigest()[:16]


def mlp(torch):
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def batches(torch, n):
    """``n`` batches of 8 (x, class), the same ones at every call."""
    g = torch.Generator().manual_seed(1)
    for _ in range(n):
        yield torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def pre_and_after(torch, watch=None, steps=6):
    """Zero once before the loop, then after every step (item 1)."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    opt.zero_grad(set_to_none=False)
    done = 0
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        done += 1
        opt.zero_grad(set_to_none=False)
    return handle, done, param_hash(model)


def accum_clip(torch, watch=None, steps=4, accumulation=3):
    """Gradient accumulation with clip_grad_norm_, zeroing after the step (item 2)."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = watch(model, opt) if watch else None
    done = 0
    for i in range(steps * accumulation):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        loss = torch.nn.functional.cross_entropy(model(x), y) / accumulation
        loss.backward()
        if (i + 1) % accumulation == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            done += 1
            opt.zero_grad()
    return handle, done, param_hash(model)


def hf_style(torch, watch=None, steps=5):
    """Keyword inputs, a dict output with the loss computed inside the model,
    zero after the step (item 2's Hugging Face-style loop)."""

    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 16)
            self.head = torch.nn.Linear(16, 50)

        def forward(self, input_ids=None, labels=None):
            logits = self.head(self.emb(input_ids))
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
            return {"loss": loss, "logits": logits}

    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = watch(model, opt) if watch else None
    done = 0
    for _ in range(steps):
        ids = torch.randint(0, 50, (4, 12))
        out = model(input_ids=ids, labels=ids)
        out["loss"].backward()
        opt.step()
        done += 1
        opt.zero_grad()
    return handle, done, param_hash(model)


def zero_first(torch, watch=None, steps=5):
    """The control: zero at the head of every step."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    done = 0
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        done += 1
    return handle, done, param_hash(model)


def zero_middle(torch, watch=None, steps=5):
    """Zero between the loss and the backward (a distillation loop's, the
    census test's leaky one): never a step that skipped its update."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return handle, steps, param_hash(model)


def nan_skip(torch, watch=None, steps=5):
    """Zero first; the fourth batch's loss is not finite and the loop skips
    it (no backward, no step): a step that skipped its update. ``done`` is
    the steps, the skipped one among them."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    bad = x.clone()
    bad[0, 0] = float("nan")
    for i in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(bad if i == 3 else x), y)
        if not torch.isfinite(loss):
            continue
        loss.backward()
        opt.step()
    return handle, steps, param_hash(model)


def wrapper_zero_after(torch, watch=None, steps=5, first=False):
    """The model is called and zeroed through a wrapper, as transformers'
    Trainer does through DDP: ``DataParallel`` (on CPU it calls the module
    itself), zeroed after the step with ``wrapped.zero_grad()``, the
    class's method run on the wrapper; watch() is given the inner model.
    ``first``: zeroed at the head of each step instead."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    wrapped = torch.nn.DataParallel(model)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    done = 0
    for _ in range(steps):
        if first:
            wrapped.zero_grad()
        torch.nn.functional.cross_entropy(wrapped(x), y).backward()
        opt.step()
        done += 1
        if not first:
            wrapped.zero_grad()
    return handle, done, param_hash(model)


def wrapper_zero_first(torch, watch=None, steps=5):
    """wrapper_zero_after's loop zeroing at the head of each step."""
    return wrapper_zero_after(torch, watch, steps, first=True)


def sharpness_aware(torch):
    """An optimizer with the interface of davda54/sam's SAM (sharpness-aware
    minimisation; written here from the paper, Foret et al. 2021): a base
    optimizer it holds, built on its param groups, runs the update;
    ``first_step()`` moves each weight up its gradient by ``rho`` in all and
    ``second_step()`` moves it back and steps the base optimizer, each
    zeroing the gradients when told; ``step(closure)`` runs the two around
    the closure's second forward and backward."""

    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base, rho=0.05, **kw):
            super().__init__(params, dict(rho=rho, **kw))
            self.base_optimizer = base(self.param_groups, **kw)
            self.param_groups = self.base_optimizer.param_groups

        def _grads(self):
            return [p for g in self.param_groups for p in g["params"] if p.grad is not None]

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            params = self._grads()
            norm = torch.norm(torch.stack([p.grad.norm(2) for p in params]), 2)
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    e = p.grad * (group["rho"] / (norm + 1e-12))
                    self.state[p]["e"] = e
                    p.add_(e)
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for p in self._grads():
                p.sub_(self.state[p]["e"])
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        def step(self, closure=None):
            self.first_step(zero_grad=True)
            with torch.enable_grad():
                closure()
            self.second_step()

    return SAM


def sam_loop(torch, watch):
    """The model, a SAM over SGD with momentum, and the watch, if any."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = sharpness_aware(torch)(model.parameters(), torch.optim.SGD, lr=0.05, momentum=0.9)
    return model, opt, (watch(model, opt) if watch else None)


def sam_two_calls(torch, watch=None, steps=5):
    """SAM as its README drives it: two forward and backward passes a step,
    ``first_step(zero_grad=True)`` between them, ``second_step(zero_grad=True)``
    after; its own ``step()`` is never called."""
    model, opt, handle = sam_loop(torch, watch)
    done = 0
    for x, y in batches(torch, steps):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.first_step(zero_grad=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.second_step(zero_grad=True)
        done += 1
    return handle, done, param_hash(model)


def sam_closure(torch, watch=None, steps=5):
    """SAM driven by ``step(closure)``: the first forward and backward in
    the loop, the second in the closure."""
    model, opt, handle = sam_loop(torch, watch)
    done = 0
    for x, y in batches(torch, steps):
        def closure():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss
        closure()
        opt.step(closure)
        opt.zero_grad()
        done += 1
    return handle, done, param_hash(model)


def unfreeze(torch, watch=None, steps=(3, 4)):
    """Fine-tuning in two stages: the head alone with SGD, then the whole
    model, unfrozen, with a new AdamW made for it; each stage with a
    learning-rate schedule of its own, which wraps its optimizer's step()."""
    torch.manual_seed(0)
    model = mlp(torch)
    for p in model[0].parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    handle = watch(model, opt) if watch else None
    done = 0
    for stage, n in enumerate(steps):
        if stage:
            for p in model.parameters():
                p.requires_grad_(True)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        for x, y in batches(torch, n):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            schedule.step()
            done += 1
    return handle, done, param_hash(model)


def eval_with_grad(torch, watch=None, epochs=2, steps=3, train_mode=True):
    """An epoch's evaluation in eval mode that forgot ``torch.no_grad()``:
    its outputs hold graphs until dropped. Zeroed after the step; trained in
    train mode, or with ``train_mode`` False in eval mode."""
    torch.manual_seed(0)
    model = mlp(torch)
    model.train(train_mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    done = 0
    for epoch in range(epochs):
        if epoch:
            model.eval()
            for _ in range(2):
                torch.nn.functional.cross_entropy(model(x), y).item()
            model.train(train_mode)
        for _ in range(steps):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            done += 1
    return handle, done, param_hash(model)


def trained_in_eval_mode(torch, watch=None):
    """A model in eval mode from the start (transformers' ``from_pretrained``
    returns one) that the loop never puts in train mode."""
    return eval_with_grad(torch, watch, epochs=1, steps=5, train_mode=False)


def adversarial(torch, watch=None, steps=5, by_backward=False):
    """Adversarial training (PGD): before each step, an attack of three
    iterations runs the model in eval mode on an input that requires a
    gradient, taken with ``torch.autograd.grad`` (or ``by_backward``, with
    ``loss.backward()``, whose gradients of the weights the step's
    ``zero_grad()`` then clears); the model trains on the attacked batch."""
    torch.manual_seed(0)
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    handle = watch(model, opt) if watch else None
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    done = 0
    for _ in range(steps):
        model.eval()
        xa = x.clone()
        for _ in range(3):
            xa.requires_grad_(True)
            loss = torch.nn.functional.cross_entropy(model(xa), y)
            if by_backward:
                loss.backward()
                g = xa.grad
            else:
                g, = torch.autograd.grad(loss, xa)
            xa = xa.detach() + 0.01 * g.sign()
        model.train()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xa), y).backward()
        opt.step()
        done += 1
    return handle, done, param_hash(model)


def adversarial_backward(torch, watch=None):
    """adversarial's attack taking its gradient with ``loss.backward()``."""
    return adversarial(torch, watch, by_backward=True)


SHAPES = {f.__name__: f for f in (pre_and_after, accum_clip, hf_style, zero_first,
                                  wrapper_zero_after, wrapper_zero_first, sam_two_calls,
                                  sam_closure, unfreeze, eval_with_grad, trained_in_eval_mode,
                                  adversarial, adversarial_backward, zero_middle, nan_skip)}


def main(argv):
    import torch
    _, done, digest = SHAPES[argv[1]](torch)
    print("steps %d result %s" % (done, digest))


if __name__ == "__main__":
    main(sys.argv)
