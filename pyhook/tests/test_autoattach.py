"""Auto-attach (`vramscope run`'s startup module) with real torch.

Each case runs in a fresh interpreter, as `vramscope run` starts one: auto-
attach changes process-wide state (torch's global hooks, vramscope.watch).
The startup directory is built from launch/sitecustomize.py, the file the Go
binary writes, so the chaining tested here is the one users get.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from frameworks import need_attr

from vramscope import _autoattach

TRAIN = os.path.join(ROOT, "testdata", "run", "train.py")


@pytest.fixture
def startup(tmp_path):
    """A startup dir as `vramscope run` makes it, and a shadowed sitecustomize after it."""
    first = tmp_path / "startup"
    first.mkdir()
    shutil.copy(os.path.join(ROOT, "launch", "sitecustomize.py"), first / "sitecustomize.py")
    shadowed = tmp_path / "shadowed"
    shadowed.mkdir()
    (shadowed / "sitecustomize.py").write_text(
        "import os\nos.environ['SHADOWED_SITECUSTOMIZE_RAN'] = '1'\n")
    path = os.pathsep.join([str(first), str(shadowed), os.path.join(ROOT, "pyhook")])
    return path


def run_py(pythonpath, code_or_args, sock="/nonexistent/vs.sock", extra_env=None):
    env = dict(os.environ, PYTHONPATH=pythonpath, VRAMSCOPE_SOCKET=sock)
    env.pop("VRAMSCOPE_AUTOATTACH", None)
    env.update(extra_env or {})
    args = code_or_args if isinstance(code_or_args, list) else ["-c", textwrap.dedent(code_or_args)]
    return subprocess.run([sys.executable, "-W", "always"] + args, env=env,
                          capture_output=True, text=True, timeout=300)


def phases(msgs, pid=None):
    return [(m["step"], m["name"], m["edge"]) for m in msgs if m.get("type") == "phase"]


def test_startup_chains_the_shadowed_sitecustomize_and_attaches(startup, monitor, torch_mod):
    proc = run_py(startup, [TRAIN, "--steps", "3"], sock=monitor.path)
    assert proc.returncode == 0, proc.stderr
    assert "trained 3 steps" in proc.stdout
    assert "Warning" not in proc.stderr, proc.stderr
    assert monitor.wait_for(lambda m: any(x.get("type") == "goodbye" for x in m.messages()))
    got = phases(monitor.messages())
    begins = [(s, n) for s, n, e in got if e == "begin"]
    # Step 0 starts at the first training forward (the eval pass under
    # no_grad is skipped); step 1 on carries the five phases.
    assert begins[:4] == [(0, "forward"), (0, "loss"), (0, "backward"), (0, "step")]
    assert begins[4:9] == [(1, n) for n in ("zero_grad", "forward", "loss", "backward", "step")]
    # The shadowed sitecustomize ran too.
    proc = run_py(startup, "import os; print(os.environ.get('SHADOWED_SITECUSTOMIZE_RAN'))",
                  extra_env={"VRAMSCOPE_AUTOATTACH": "0"})
    assert proc.stdout.strip() == "1", proc.stderr


STATE = """
import json, torch, vramscope
from vramscope import _autoattach, _api
from torch.nn.modules import module as modmod
st = _autoattach.state()
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters())
def step():
    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
"""


def test_attach_finds_the_optimizer_and_removes_the_global_hook(startup, torch_mod):
    proc = run_py(startup, STATE + """
hooks_before = len(modmod._global_forward_pre_hooks)
step()
print(json.dumps({
    "before": hooks_before, "after": len(modmod._global_forward_pre_hooks),
    "model": st.model is model, "optimizer": st.optimizer is opt,
    "watching": st.handle is not None and st.handle.active}))
""")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"before": 1, "after": 0, "model": True, "optimizer": True, "watching": True}


def test_an_attached_model_the_loop_drops_is_freed_with_its_optimizer(startup, torch_mod):
    # A k-fold loop makes a model and an optimizer per fold and drops them:
    # auto-attach held the first fold's for the rest of the process (on a
    # GPU, its weights, gradients and Adam state). It now holds them weakly,
    # and the second fold's model, attached in the first's place, goes too;
    # the module hook is back on for a model after it.
    proc = run_py(startup, """
import gc, json, weakref, torch
from vramscope import _autoattach
refs = []
for fold in range(2):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters())
    for _ in range(2):
        opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
    attached = _autoattach.state().model is model
    refs.append([weakref.ref(model), weakref.ref(opt), attached])
    del model, opt
    gc.collect()
st = _autoattach.state()
print(json.dumps({"alive": [[m() is not None, o() is not None, a] for m, o, a in refs],
                  "rearmed": st.model is None and st.module_hook is not None
                  and st.handle is _autoattach.GONE}))
""")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"alive": [[False, False, True], [False, False, True]], "rearmed": True}


def test_a_loop_calling_the_models_children_gets_the_model_watched(startup, torch_mod):
    # The first training forward is a child's (model[0]): the model the
    # optimizer trains is watched, and from its second step on its
    # children's calls make the forward (docs/run.md, "Which module").
    proc = run_py(startup, STATE + """
for _ in range(3):
    opt.zero_grad()
    out = torch.randn(4, 8)
    for child in model:
        out = child(out)
    out.sum().backward()
    opt.step()
print(json.dumps({"model": st.model is model, "optimizer": st.optimizer is opt,
                  "children": st.handle.watcher._child_layout}))
""")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"model": True, "optimizer": True, "children": True}, got


COMPILED_FUNCTION = STATE + """
import hashlib
torch.manual_seed(0)
for p in model.parameters():
    torch.nn.init.normal_(p)
forward = torch.compile(lambda x: model(x), fullgraph=True)
for _ in range(3):
    opt.zero_grad()
    forward(torch.ones(4, 8)).sum().backward()
    opt.step()
w = st.handle.watcher if st is not None and st.handle is not None else None
print(json.dumps({
    "weights": hashlib.sha1(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest(),
    "model": st is not None and st.model is model,
    "optimizer": st is not None and st.optimizer is opt,
    "unseen": w is not None and w.forward_compiled,
    "children": [bool(c._forward_pre_hooks) for c in model]}))
"""


def test_a_model_only_a_compiled_function_runs_is_attached_at_its_first_step(startup,
                                                                          torch_mod):
    # The global module hook stays out of compiled code, where it raised
    # (fullgraph=True; without it the call ran uncompiled, and nothing
    # attached). No module trains outside it before the first step(): the
    # optimizer's model is watched from there, its forward unseen and its
    # children left alone; the weights as without auto-attach.
    need_attr(torch_mod, "compile", "torch.compile")
    proc = run_py(startup, COMPILED_FUNCTION)
    assert proc.returncode == 0, proc.stderr
    assert "vramscope" not in proc.stderr, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    plain = run_py(startup, COMPILED_FUNCTION, extra_env={"VRAMSCOPE_AUTOATTACH": "0"})
    assert plain.returncode == 0, plain.stderr
    want = json.loads(plain.stdout.strip().splitlines()[-1])
    assert got["weights"] == want["weights"]
    assert (got["model"], got["optimizer"], got["unseen"]) == (True, True, True), got
    assert got["children"] == [False, False, False], got


def test_find_model_takes_the_innermost_module_with_the_optimizers_parameters(torch_mod):
    torch = torch_mod

    class Wrapper(torch.nn.Module):  # as DistributedDataParallel holds its module
        def __init__(self, module):
            super().__init__()
            self.module = module

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    wrapper = Wrapper(model)
    outer = torch.nn.ModuleDict({"m": wrapper, "other": torch.nn.Linear(2, 2)})
    assert _autoattach.find_model(torch, torch.optim.SGD(model.parameters(), lr=0.1)) is model
    assert _autoattach.find_model(torch, torch.optim.SGD(outer.parameters(), lr=0.1)) is outer
    assert _autoattach.find_model(
        torch, torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)) is None


def test_find_owner_climbs_to_the_model_the_optimizer_trains(torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)),
                                torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert _autoattach.find_owner(torch, model[0][0], opt) is model
    own = torch.optim.SGD(model[0].parameters(), lr=0.1)
    assert _autoattach.find_owner(torch, model[0][0], own) is model[0]
    alone = torch.optim.SGD(model[0][0].parameters(), lr=0.1)
    assert _autoattach.find_owner(torch, model[0][0], alone) is model[0][0]
    apart = torch.nn.Linear(3, 3)  # a second model under one optimizer: no ancestor holds both
    both = torch.optim.SGD(list(model.parameters()) + list(apart.parameters()), lr=0.1)
    assert _autoattach.find_owner(torch, model[1], both) is model[1]


def test_explicit_watch_after_attach_takes_over_the_same_connection(startup, torch_mod):
    proc = run_py(startup, STATE + """
step()
auto, client = st.handle, _api.current_client()
mine = vramscope.watch(model, opt)
step()
print(json.dumps({
    "auto_removed": not auto.active, "mine": mine.active,
    "same_client": _api.current_client() is client and not client.closed,
    "model_pre_hooks": len(model._forward_pre_hooks), "standing_down": st.standing_down}))
""")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"auto_removed": True, "mine": True, "same_client": True,
                   "model_pre_hooks": 1, "standing_down": True}
    assert "Warning" not in proc.stderr, proc.stderr


def test_explicit_watch_before_training_stands_auto_attach_down(startup, torch_mod):
    proc = run_py(startup, STATE + """
mine = vramscope.watch(model, opt)
step(); step()
print(json.dumps({"auto": st.handle is None and st.model is None,
                  "hooks": len(modmod._global_forward_pre_hooks), "mine": mine.active}))
""")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"auto": True, "hooks": 0, "mine": True}


def test_a_late_optimizer(startup, torch_mod):
    # Forward before the optimizer exists: found by torch's global optimizer
    # hook where torch has it (2.x), else one warning says what to do.
    proc = run_py(startup, """
import json, torch
from vramscope import _autoattach
import torch.optim.optimizer as optmod
st = _autoattach.state()
model = torch.nn.Linear(4, 2)
model(torch.randn(2, 4)).sum().backward()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.step()
print(json.dumps({"global_hook": hasattr(optmod, "register_optimizer_step_pre_hook"),
                  "optimizer": st.optimizer is opt}))
""")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    if got["global_hook"]:
        assert got["optimizer"], proc.stderr
    else:
        assert not got["optimizer"]
        assert proc.stderr.count("found no optimizer for Linear") == 1, proc.stderr


def test_install_before_torch_waits_for_its_import(torch_mod):
    env_path = os.path.join(ROOT, "pyhook")
    proc = run_py(env_path, """
import sys
from vramscope import _autoattach
_autoattach.install()
st = _autoattach.state()
assert "torch" not in sys.modules and st.module_hook is None
import torch
print(st.module_hook is not None, st.finder is None, st.finder not in sys.meta_path)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "True"]


def accelerated_optimizer(torch):
    class _AcceleratedOptimizer(torch.optim.Optimizer):
        """accelerate's AcceleratedOptimizer as its source has it (src/accelerate/
        optimizer.py): it subclasses Optimizer, skips Optimizer.__init__, keeps
        the real optimizer in ``.optimizer`` and forwards ``param_groups`` to it."""

        def __init__(self, optimizer):  # noqa: D107 - no super().__init__, as accelerate
            self.optimizer = optimizer

        @property
        def param_groups(self):
            return self.optimizer.param_groups

        @param_groups.setter
        def param_groups(self, value):
            self.optimizer.param_groups = value
    return _AcceleratedOptimizer


def test_find_optimizer_of_a_model_split_between_two_takes_the_larger_part(torch_mod):
    """Muon for the matrices, AdamW for the rest: the optimizer that holds
    the most bytes of the model, though the other holds more tensors."""
    torch = torch_mod
    body = torch.nn.Linear(64, 64, bias=False)  # one tensor, 4096 values
    head = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 4))  # four, 388
    model = torch.nn.Sequential(body, head)
    small = torch.optim.AdamW(head.parameters(), lr=0.1)
    large = torch.optim.SGD(body.parameters(), lr=0.1, momentum=0.9)
    assert _autoattach.find_optimizer(torch, model) is large
    assert _autoattach.find_optimizer(torch, head) is small
    del small, large


# Three steps of a loop (%(step)s: one step's body), counting in
# attach_walks the walks of the live objects (gc.get_objects) in step 0,
# where auto-attach attaches.
WALKS_IN_STEP_0 = """
walks, real = [], gc.get_objects
def counted(*args):
    walks.append(1)
    return real(*args)
gc.get_objects = counted
for i in range(3):%(step)s
    if i == 0:
        gc.get_objects, attach_walks = real, len(walks)
"""


def test_a_model_split_between_two_optimizers_is_named_once_at_attach(startup, torch_mod):
    """Auto-attach watches the larger part's optimizer; one warning names
    the other and says how to watch both. A learning-rate finder's
    optimizer over the same parameters is no partner. Finding the
    optimizer and its partners takes one walk of the live objects."""
    proc = run_py(startup, """
import gc, json, torch
from vramscope import _autoattach
body = torch.nn.Linear(64, 64, bias=False)
head = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 4))
model = torch.nn.Sequential(body, head)
finder = torch.optim.SGD(body.parameters(), lr=0.1)
mats = torch.optim.SGD(body.parameters(), lr=0.1, momentum=0.9)
rest = torch.optim.AdamW(head.parameters(), lr=0.1)
""" + WALKS_IN_STEP_0 % {"step": """
    mats.zero_grad(); rest.zero_grad()
    model(torch.randn(8, 64)).pow(2).mean().backward()
    mats.step(); rest.step()"""} + """
st = _autoattach.state()
print(json.dumps({"watched": st.optimizer is mats or st.optimizer is finder,
                  "walks": attach_walks,
                  "partners": [type(o).__name__ for o in
                               _autoattach.split_partners(torch, model, st.optimizer)]}))
""")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"watched": True, "walks": 1, "partners": ["AdamW"]}
    assert proc.stderr.count("Sequential is trained by 2 optimizers (SGD, AdamW); "
                             "auto-attach watches SGD alone") == 1, proc.stderr
    assert "vramscope.watch(model, [...])" in proc.stderr


def test_a_model_trained_in_eval_mode_is_attached_after_one_walk(startup, torch_mod):
    """A model left in eval mode (transformers' from_pretrained) that an
    optimizer trains: its optimizer, and whether others train a part of it,
    are found in one walk of the live objects, as for a model in train mode."""
    proc = run_py(startup, """
import gc, json, torch
from vramscope import _autoattach
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
model.eval()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""" + WALKS_IN_STEP_0 % {"step": """
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()"""} + """
print(json.dumps({"walks": attach_walks, "attached": _autoattach.state().model is model}))
""")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"walks": 1, "attached": True}


def test_find_optimizer_prefers_the_wrapped_one_and_the_model_s_own(torch_mod):
    torch = torch_mod
    model = torch.nn.Linear(4, 4)
    other = torch.nn.Linear(4, 4)
    inner = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapper = accelerated_optimizer(torch)(inner)
    unrelated = torch.optim.SGD(other.parameters(), lr=0.1)
    assert _autoattach.find_optimizer(torch, model) is inner
    assert _autoattach.find_optimizer(torch, other) is unrelated
    assert _autoattach.find_optimizer(torch, torch.nn.Linear(2, 2)) is None
    del wrapper


def test_watch_imported_before_torch_still_wins(startup, torch_mod):
    # `from vramscope import watch` runs before auto-attach is installed (at
    # torch's import), so this watch is the unpatched one: auto-attach
    # must still see it and stand down at the first forward.
    proc = run_py(startup, """
import json
from vramscope import watch
import torch
from vramscope import _autoattach
from torch.nn.modules import module as modmod
st = _autoattach.state()
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
h = watch(model, opt)
for _ in range(2):
    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
print(json.dumps({"auto_model": st.model is None, "standing_down": st.standing_down,
                  "hooks": len(modmod._global_forward_pre_hooks),
                  "model_pre_hooks": len(model._forward_pre_hooks)}))
""")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"auto_model": True, "standing_down": True,
                                       "hooks": 0, "model_pre_hooks": 1}


def test_startup_costs_nothing_without_torch(startup, torch_mod):
    proc = run_py(startup, "import sys; print(sorted(m for m in sys.modules if 'vramscope' in m or m == 'torch'))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_late_optimizer_rewatch_keeps_the_connection(startup, torch_mod):
    # What torch 2.x's global optimizer step pre-hook does on a late
    # optimizer's first step(). torch 1.13 lacks the hook, so its call site
    # is reproduced: a registry of RemovableHandles iterated live with
    # chain(), as profile_hook_step does in torch 2.x's torch/optim/
    # optimizer.py (a hook that removed itself there would raise
    # "mutated during iteration" into step()). The model is watched again
    # with the optimizer, on the same client.
    proc = run_py(startup, """
import json, warnings, torch
from collections import OrderedDict
from itertools import chain
from torch.utils.hooks import RemovableHandle
from vramscope import _autoattach, _api
st = _autoattach.state()
registry = OrderedDict()
st.step_hook = RemovableHandle(registry)
registry[st.step_hook.id] = _autoattach._on_optimizer_step
other_tool = RemovableHandle(registry)   # another library's global hook after ours
registry[other_tool.id] = lambda *a: None

def step_pre_hooks(optimizer):
    for pre_hook in chain(registry.values(), OrderedDict().values()):
        pre_hook(optimizer, (optimizer,), {})

model = torch.nn.Linear(4, 2)
model(torch.randn(2, 4)).sum().backward()
first, client = st.handle, _api.current_client()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
other = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
step_pre_hooks(other)   # not this model's: ignored
ignored = st.optimizer is None
step_pre_hooks(opt)
step_pre_hooks(opt)
print(json.dumps({"ignored_other": ignored, "optimizer": st.optimizer is opt,
                  "old_removed": not first.active, "new": st.handle.active,
                  "same_client": _api.current_client() is client and not client.closed,
                  "model_pre_hooks": len(model._forward_pre_hooks)}))
""")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"ignored_other": True, "optimizer": True, "old_removed": True,
                                       "new": True, "same_client": True, "model_pre_hooks": 1}


KFOLD = """
import gc, json, sys, weakref, torch
torch.manual_seed(0)
folds, alive, kept = [], [], []
for fold in range(3):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters())
    if sys.argv[1] == "listed":
        kept.append(model)
    for _ in range(5):
        opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
    alive.append(sum(r() is not None for r in folds))
    folds.append(weakref.ref(model))
    if sys.argv[1] == "freed":
        del model, opt
        gc.collect()
print(json.dumps(alive))
print("trained")
"""


@pytest.mark.parametrize("old", ["rebound", "freed", "listed"])
def test_a_new_model_later_in_the_process_is_attached_in_place_of_the_last(
        startup, monitor, torch_mod, tmp_path, old):
    # A k-fold loop: a new model and optimizer per fold. Auto-attach hooked
    # the first fold's only. Now, once the model watched no longer trains
    # (freed, when the loop rebinds or deletes it; or, kept in a list, a
    # second backward that no watch takes with no step of its own between),
    # the global module hook goes back on, and the next fold's model is
    # watched from its next forward on, on the same connection, named apart
    # from the folds before.
    script = tmp_path / "kfold.py"
    script.write_text(KFOLD)
    proc = run_py(startup, [str(script), old], sock=monitor.path)
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    assert monitor.wait_for(lambda m: any(x.get("type") == "goodbye" for x in m.messages()))
    msgs = monitor.messages()
    assert sum(m.get("type") == "hello" for m in msgs) == 1
    assert [m["reason"] for m in msgs if m.get("type") == "goodbye"] == ["exit"]
    ends = [(m["model"], m["step"]) for m in msgs
            if m.get("type") == "phase" and m["name"] == "step" and m["edge"] == "end"]
    names = [n for n, _ in ends]
    assert sorted(set(names), key=names.index) == ["Sequential", "Sequential_2", "Sequential_3"]
    # The folds after the first are watched from their first step (the
    # model freed as the loop let it go) or their third (kept).
    seen = 3 if old == "listed" else 5
    assert [names.count(n) for n in ("Sequential", "Sequential_2", "Sequential_3")] == [5, seen, seen]
    assert [s for _, s in ends] == list(range(5 + 2 * seen))
    # A fold the loop dropped is freed then, as without the hook (its
    # watch held it in a cycle: until its retirement, or the collector's
    # next pass).
    alive = [0, 1, 2] if old == "listed" else [0, 0, 0]
    assert json.loads(proc.stdout.splitlines()[0]) == alive


def test_backwards_beside_the_models_own_keep_it_watched(startup, torch_mod):
    # Two probes trained on the model's features after each step, and a
    # GAN's two models: backwards that no watch takes come beside the
    # watched model's own steps. It stays watched, and the module hook the
    # probes' backwards put back once is gone again.
    proc = run_py(startup, STATE + """
probes = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
popt = torch.optim.SGD([p for m in probes for p in m.parameters()], lr=0.1)
for _ in range(4):
    opt.zero_grad(); out = model(torch.randn(4, 8)); out.sum().backward(); opt.step()
    popt.zero_grad()
    for m in probes:
        m(out.detach()).sum().backward()
    popt.step()
print(json.dumps({"model": st.model is model, "hooks": len(modmod._global_forward_pre_hooks),
                  "steps": st.handle.client.step, "name": st.handle.watcher.name,
                  "kept": st.keep_model}))
""")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"model": True, "hooks": 0, "steps": 4, "name": "Sequential", "kept": True}, got
    # The same where the loop calls the model's children: the first module
    # that trains after the probes is a child, whose optimizer and owner are
    # the watched model's.
    proc = run_py(startup, STATE + """
probes = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
popt = torch.optim.SGD([p for m in probes for p in m.parameters()], lr=0.1)
for _ in range(4):
    opt.zero_grad()
    out = torch.randn(4, 8)
    for child in model:
        out = child(out)
    out.sum().backward(); opt.step()
    popt.zero_grad()
    for m in probes:
        m(out.detach()).sum().backward()
    popt.step()
print(json.dumps({"model": st.model is model, "optimizer": st.optimizer is opt,
                  "hooks": len(modmod._global_forward_pre_hooks), "kept": st.keep_model}))
""")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"model": True, "optimizer": True, "hooks": 0, "kept": True}, got
    proc = run_py(startup, """
import json, torch
from vramscope import _autoattach
from torch.nn.modules import module as modmod
G = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 6))
D = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
optD, optG = torch.optim.Adam(D.parameters()), torch.optim.Adam(G.parameters())
for _ in range(5):
    optD.zero_grad()
    D(torch.randn(4, 6)).mean().backward()
    D(G(torch.randn(4, 4)).detach()).mean().neg().backward()
    optD.step()
    optG.zero_grad()
    D(G(torch.randn(4, 4))).mean().backward()
    optG.step()
st = _autoattach.state()
print(json.dumps({"D": st.model is D, "hooks": len(modmod._global_forward_pre_hooks)}))
""")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"D": True, "hooks": 0}, got


def test_a_later_model_is_named_apart_from_one_attached_at_its_step(startup, monitor, torch_mod):
    # A loop whose training step is the optimizer's closure (Lightning's
    # shape): the first model is attached at its first step() (torch 2.x's
    # global step hook), then a second such model, the first dropped: the
    # second is attached in the first's place under a name of its own.
    need_attr(sys.modules.get("torch.optim.optimizer"), "register_optimizer_step_pre_hook",
              "torch.optim.optimizer.register_optimizer_step_pre_hook")
    proc = run_py(startup, """
import torch
for fold in range(2):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def closure():
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        return loss
    for _ in range(5):
        opt.step(closure)
""", sock=monitor.path)
    assert proc.returncode == 0, proc.stderr
    assert monitor.wait_for(lambda m: any(x.get("type") == "goodbye" for x in m.messages()))
    names = [m["model"] for m in monitor.messages()
             if m.get("type") == "phase" and m["name"] == "step" and m["edge"] == "end"]
    assert sorted(set(names), key=names.index) == ["Sequential", "Sequential_2"], names
