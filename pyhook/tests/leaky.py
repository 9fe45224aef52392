"""Training loops that keep memory alive across steps, each the one-line way
users do it, and two controls that do not. Each loop runs ``steps`` steps
under ``vramscope.watch`` and calls ``at_step(step)`` after each optimizer
step, where the test asks for a census. The line each leak is on carries a
``# leak:`` comment naming it; the tests find it there."""

import torch
import vramscope

features = []  # filled by a forward hook (hook_features)
BUFFER = None  # the constant control's large buffer


def _model(width=32):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(width, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))


def _train(model, steps, at_step, socket, body):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with vramscope.watch(model, opt, socket=socket):
        for step in range(steps):
            body(step, model, opt)
            at_step(step)


def losses_list(steps, at_step, socket):
    losses = []

    def body(step, model, opt):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)  # leak: losses_list

    _train(_model(), steps, at_step, socket, body)


def total_loss(steps, at_step, socket):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total = 0
    with vramscope.watch(model, opt, socket=socket):
        for step in range(steps):
            loss = model(torch.randn(16, 32)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss  # leak: total_loss
            at_step(step)


class Cache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)
        self.outputs = []

    def forward(self, x):
        y = self.lin(x)
        self.outputs.append(y.detach())  # leak: module_cache
        return y


def module_cache(steps, at_step, socket):
    model = torch.nn.Sequential(Cache(), torch.nn.Tanh(), torch.nn.Linear(32, 1))

    def body(step, model, opt):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    _train(model, steps, at_step, socket, body)


def eval_without_no_grad(steps, at_step, socket):
    outputs = []

    def body(step, model, opt):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with vramscope.phase("eval"):
            outputs.append(model(torch.randn(64, 32)))  # leak: eval_outputs

    _train(_model(), steps, at_step, socket, body)


def hook_features(steps, at_step, socket):
    model = _model()
    model[1].register_forward_hook(lambda m, i, o: features.append(o))  # leak: hook_features

    def body(step, model, opt):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    try:
        _train(model, steps, at_step, socket, body)
    finally:
        features.clear()


def constant_buffer(steps, at_step, socket):
    global BUFFER
    BUFFER = torch.zeros(1 << 20)  # 4 MiB, made once

    def body(step, model, opt):
        loss = (model(torch.randn(16, 32)) + BUFFER[:1]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    try:
        _train(_model(), steps, at_step, socket, body)
    finally:
        BUFFER = None


def growing_input(steps, at_step, socket):
    def body(step, model, opt):
        x = torch.randn(16 * (step + 1), 32)  # the batch grows; nothing is kept
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    _train(_model(), steps, at_step, socket, body)
