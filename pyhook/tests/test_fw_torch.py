"""torch 2.x's own training features, in this process with an explicit
``watch()``, against a real ``vramscope record`` (frameworks.check_loop:
the same weights, warnings and output without the hook, one step per
optimizer step, the five phases and no other):

* ``torch.compile`` with its default backend, inductor (C++ kernels built
  with the machine's compiler on CPU), of the model and in place
  (``Module.compile(fullgraph=True)``), and of a function that calls the
  optimizer's step;
* non-reentrant activation checkpointing
  (``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``): the
  checkpointed blocks run again inside backward;
* ``torch.autocast("cpu", dtype=torch.bfloat16)`` around forward and loss.
"""

import pytest

import vramscope
from frameworks import check_loop, need_attr
from loops import batches, mlp, param_hash

STEPS = 3


class Checkpointed:
    """A model whose two blocks are checkpointed in its forward."""

    @staticmethod
    def build(torch):
        from torch.utils.checkpoint import checkpoint

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
                self.b = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())
                self.head = torch.nn.Linear(32, 4)

            def forward(self, x):
                x = checkpoint(self.a, x, use_reentrant=False)
                x = checkpoint(self.b, x, use_reentrant=False)
                return self.head(x)

        return Net()


def train(torch, model, sock, forward=None, watched=None, build=None):
    """STEPS plain steps of ``model`` (zero_grad, forward, loss, backward,
    step), watching ``watched`` (default: ``model``); with ``build``, of
    the model ``build(model)`` returns once the watch is on."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    handle = vramscope.watch(watched or model, opt, socket=sock) if sock else None
    if build is not None:
        model = build(model)
    for x, y in batches(torch, STEPS):
        opt.zero_grad()
        loss = forward(model, x, y) if forward else \
            torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    if handle is not None:
        handle.remove()
    return STEPS


def compile_counts(torch, build, sock, breaks=True, watch_original=False, after_watch=False,
                   make=mlp):
    """Train the model ``build(net)`` returns (with ``after_watch``, built
    once ``net`` is watched), ``net`` made by ``make``; the weights and what
    dynamo compiled (graphs and calls captured) and, with ``breaks``, where
    it broke the graph. Where the hook's hooks stay outside the compiled
    code it adds no graph, break or recompile."""
    need_attr(torch, "compile", "torch.compile")
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    torch.manual_seed(0)
    net = make(torch)
    if after_watch:
        steps = train(torch, net, sock, build=build)
    else:
        steps = train(torch, build(net), sock, watched=net if watch_original else None)
    graphs = dict(counters["stats"]), dict(counters["graph_break"]) if breaks else None
    return (param_hash(net), graphs), steps


def compiled(torch, sock=None):
    return compile_counts(torch, lambda net: torch.compile(net), sock)


def compiled_in_place(torch, sock=None):
    """Module.compile(fullgraph=True): the module's own call is compiled,
    its forward hooks included; a graph break there raises."""
    def build(net):
        net.compile(fullgraph=True)
        return net

    return compile_counts(torch, build, sock)


def compiled_after_watch(torch, sock=None):
    """watch(net), then torch.compile(net) trains (what the HF Trainer's
    torch_compile does to the model its callbacks get): dynamo's trace of
    the model's call gives the hook's forward hooks to the compiled wrapper
    (_compiled), where they run eagerly; the activation meter steps aside.
    The same graphs, calls and breaks (none) as without the hook."""
    return compile_counts(torch, lambda net: torch.compile(net), sock, watch_original=True)


def own_mlp(torch):
    """The MLP as a class of the user's own: dynamo compiles the forward of
    a module of torch's own classes (``nn.Sequential``) that has hooks as a
    frame of its own where it would otherwise run it eagerly
    (``trace_rules.check_verbose``, torch 2.15), which a model's own class
    never is."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    return Net()


def compiled_ddp_after_watch(torch, sock=None):
    """watch(net), then torch.compile(DistributedDataParallel(net)) trains,
    one gloo rank: dynamo runs DDP's call of net eagerly
    (``_inside_ddp_forward`` is not traced) and compiles net's forward as
    a frame of its own, where the hook's forward hooks stay out; the
    compiled wrapper of the DDP wrapper takes them (_compiled), as it does
    for net compiled itself. The same graphs, calls and breaks as without
    the hook."""
    import tempfile

    dist = torch.distributed
    with tempfile.TemporaryDirectory() as store:
        dist.init_process_group("gloo", init_method="file://" + store + "/pg", rank=0,
                                world_size=1)
        try:
            ddp = torch.nn.parallel.DistributedDataParallel
            return compile_counts(torch, lambda net: torch.compile(ddp(net)), sock,
                                  watch_original=True, make=own_mlp)
        finally:
            dist.destroy_process_group()


def compiled_fullgraph_after_watch(torch, sock=None):
    """watch(net), then torch.compile(net, fullgraph=True) trains: the hook's
    forward hooks stay out of the compiled call, where a graph break would
    raise (_compiled); the wrapper gets them, eagerly, from its second call
    on. The same graphs, calls and breaks (none) as without the hook."""
    return compile_counts(torch, lambda net: torch.compile(net, fullgraph=True), sock,
                          after_watch=True)


def compiled_in_place_after_watch(torch, sock=None):
    """watch(net), then net.compile(), then net.compile(fullgraph=True): the
    hook's forward hooks leave the model for a wrapper of its compiled call,
    and the second compile's call is wrapped again; no graph break."""
    def build(net):
        net.compile()
        net.compile(fullgraph=True)
        return net

    return compile_counts(torch, build, sock, after_watch=True)


def children_compiled_after_watch(torch, sock=None):
    """watch(net), then each of its children compiled in place with
    fullgraph=True: the activation meter's hooks stay out of their compiled
    calls (no graph break, none raised)."""
    def build(net):
        for child in net.children():
            child.compile(fullgraph=True)
        return net

    return compile_counts(torch, build, sock, after_watch=True)


def compiled_function_fullgraph(torch, sock=None):
    """watch(net), then a function compiled with fullgraph=True calls net and
    the loss: no wrapper of the model to take the hook's forward hooks, and
    a graph break would raise, so they stay out of the trace (_compiled)
    and the forward goes unseen. The same graphs, calls and breaks (none)
    as without the hook."""
    def build(net):
        @torch.compile(fullgraph=True)
        def forward(x):
            return net(x)

        return forward

    return compile_counts(torch, build, sock, after_watch=True)


def compiled_step(torch, sock=None):
    """The optimizer's step compiled (a ``torch.compile``d function that
    calls ``opt.step()``, the compiled-optimizer recipe): dynamo reaches the
    step hooks, breaks the graph at their first call (a read of the clock)
    and runs them eagerly; the same weights, warnings and compiled ops as
    without them."""
    need_attr(torch, "compile", "torch.compile")
    torch._dynamo.reset()
    torch.manual_seed(0)
    net = mlp(torch)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    handle = vramscope.watch(net, opt, socket=sock) if sock else None

    @torch.compile
    def step():
        opt.step()

    torch._dynamo.utils.counters.clear()
    for x, y in batches(torch, STEPS):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        step()
    if handle is not None:
        handle.remove()
    # the same ops compiled (the hooks add graph breaks, a fixed few, not ops)
    return (param_hash(net), torch._dynamo.utils.counters["stats"]["calls_captured"]), STEPS


def checkpointed(torch, sock=None):
    torch.manual_seed(0)
    net = Checkpointed.build(torch)
    return param_hash(net), train(torch, net, sock)


def autocast_bf16(torch, sock=None):
    def forward(model, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.nn.functional.cross_entropy(model(x), y)

    torch.manual_seed(0)
    net = mlp(torch)
    return param_hash(net), train(torch, net, sock, forward)


LOOPS = {"compile": compiled, "compile_in_place": compiled_in_place,
         "compile_after_watch": compiled_after_watch, "compiled_step": compiled_step,
         "compile_ddp_after_watch": compiled_ddp_after_watch,
         "compile_fullgraph_after_watch": compiled_fullgraph_after_watch,
         "compile_in_place_after_watch": compiled_in_place_after_watch,
         "children_compiled_after_watch": children_compiled_after_watch,
         "compiled_function_fullgraph": compiled_function_fullgraph,
         "checkpoint": checkpointed, "autocast_bf16": autocast_bf16}


# A model compiled after watch(): dynamo traces its first call, where the
# wrapper takes the forward hooks and forward begins; that call's end goes
# unseen, so step 0's forward runs on to the backward, with no loss.
FIRST_STEP = {name: ["zero_grad", "forward", "backward", "step"]
              for name in ("compile_after_watch", "compile_fullgraph_after_watch",
                           "compile_ddp_after_watch")}
# A compiled function that calls the model with fullgraph=True: every
# forward goes unseen (the backward's read covers it).
UNSEEN_FORWARD = ["zero_grad", "backward", "step"]
FIRST_STEP["compiled_function_fullgraph"] = UNSEEN_FORWARD


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_torch_feature(name, torch_mod, vs_bin, workdir, recorders, capfd):
    if name in ("compiled_step", "compile_ddp_after_watch"):
        # Dynamo logs its tracing of a profiler context (the step's, DDP's
        # forward's) once a process: a first run, not compared, takes that line.
        LOOPS[name](torch_mod)
        capfd.readouterr()
    check_loop(LOOPS[name], STEPS, 1, torch_mod, vs_bin, workdir, recorders, capfd,
               first=FIRST_STEP.get(name),
               rest=UNSEEN_FORWARD if name == "compiled_function_fullgraph" else None)


def test_a_compiled_function_that_calls_the_model_leaves_its_children_alone(torch_mod):
    """A loop whose compiled function runs the model: the forward goes
    unseen (the hook stays out of the trace), and the unclaimed backward
    is the step's, with no children hooked for a layout they do not have
    (their hooks, inside the compiled call, would never run, and the
    child layout's steps take the general paths)."""
    torch = torch_mod
    need_attr(torch, "compile", "torch.compile")
    torch._dynamo.reset()
    net = mlp(torch)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    handle = vramscope.watch(net, opt, socket=None)
    forward = torch.compile(lambda x: net(x))
    try:
        for x, y in batches(torch, 4):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(forward(x), y).backward()
            opt.step()
        assert not [c for c in net.children() if c._forward_pre_hooks or c._forward_hooks]
    finally:
        handle.remove()
