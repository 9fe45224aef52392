"""The user's traceback under ``vramscope run`` (vramscope/_tracebacks.py).

An exception the user's script raises passes through the hook's wrappers
(the optimizer's step and zero_grad, Tensor.backward, torch's import in the
startup module) on its way out. Each case runs a real script under the real
binary and compares the traceback with the one the same script prints run
plainly: the same frames, the user's first and last, none of vramscope's,
and the same exit status.
"""

import os
import re
import subprocess
import sys
import traceback

import pytest

from conftest import ROOT, make_config

from vramscope import _client, _patch, _safe, _watch

MODEL = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if BOOM == "forward" and STEP == 1:
            raise RuntimeError("boom in forward")
        return self.lin(x)

class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if BOOM == "backward" and STEP == 1:
            raise RuntimeError("boom in backward")
        return g * 2

class Opt(torch.optim.SGD):
    def step(self, closure=None):
        if BOOM == "step" and STEP == 1:
            raise RuntimeError("boom in step")
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if BOOM == "zero_grad" and STEP == 1:
            raise RuntimeError("boom in zero_grad")
        return super().zero_grad(*args, **kwargs)

net = Net()
opt = Opt(net.parameters(), lr=0.1)
for STEP in range(3):
    opt.zero_grad()
    Boom.apply(net(torch.randn(2, 4))).sum().backward()
    opt.step()
"""

CASES = {
    # Before training: nothing of the hook's is on the stack yet.
    "top": 'import torch\nraise ValueError("boom before training")\n',
    # Step 1, after a step that attached the hook and wrapped its calls.
    "forward": 'BOOM = "forward"\n' + MODEL,
    "backward": 'BOOM = "backward"\n' + MODEL,
    "step": 'BOOM = "step"\n' + MODEL,
    "zero_grad": 'BOOM = "zero_grad"\n' + MODEL,
    # The startup module's wrapper of torch's import: a torch that fails to import.
    "import": 'import sys\nsys.path.insert(0, FAKE)\nimport torch\n',
}

TRACEBACK = re.compile(r"^Traceback \(most recent call last\):\n(?:[ \t].*\n)+\S.*$", re.M)
FRAME = re.compile(r'^  File "(.*)", line (\d+), in (.*)$', re.M)


def traceback_of(output):
    """The one traceback in output: its frames (file, line, function) and
    its last line (the exception)."""
    found = TRACEBACK.findall(output)
    assert len(found) == 1, output
    return FRAME.findall(found[0]), found[0].splitlines()[-1], found[0]


HOOK_FILES = {f for f in os.listdir(os.path.join(ROOT, "pyhook", "vramscope")) if f.endswith(".py")}


def the_hook_s(file):
    """A file of the hook package (the startup directory's copy), or the startup module."""
    parent = os.path.basename(os.path.dirname(file))
    return (parent == "vramscope" and os.path.basename(file) in HOOK_FILES) \
        or (parent.startswith("startup-") and os.path.basename(file) == "sitecustomize.py")


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_shows_the_user_s_traceback_without_vramscope_frames(case, vs_bin, tmp_path, torch_mod):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("a torch that fails to import")\n')
    script = tmp_path / ("raise_in_%s.py" % case)
    script.write_text(CASES[case].replace("FAKE", repr(str(tmp_path / "fake"))))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMSCOPE_")}

    plain = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                           capture_output=True, text=True, timeout=300)
    rec = str(tmp_path / "run.jsonl")
    run = subprocess.run([vs_bin, "run", "--record", rec, "--", sys.executable, str(script)],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)

    want, want_exc, want_text = traceback_of(plain.stderr)
    got, got_exc, got_text = traceback_of(run.stdout + run.stderr)
    shown = "under vramscope run:\n%s\n\nplainly:\n%s" % (got_text, want_text)
    assert not [f for f in got if the_hook_s(f[0])], shown
    # The user's frames, each at its line, first and last; torch's own may
    # differ (its module call takes another path, through another frame on
    # torch 2, when a module hook is registered).
    user = str(script)
    assert [f for f in got if f[0] == user] == [f for f in want if f[0] == user], shown
    assert got[0] == want[0] and got[-1] == want[-1], shown
    assert got_exc == want_exc, shown
    assert run.returncode == plain.returncode == 1, run.stdout + run.stderr
    if case in ("forward", "backward", "step", "zero_grad"):
        # The hook was attached, its wrappers on the stack, when step 1 raised.
        with open(rec) as f:
            assert '"step":1' in f.read().replace(" ", ""), "no step 1 in the recording"


class _Loop:
    def step(self):
        try:
            raise KeyError("cause")
        except KeyError as cause:
            raise ValueError("the user's") from cause


def _frames(exc):
    return [(os.path.basename(f.filename), f.name) for f in traceback.extract_tb(exc.__traceback__)]


def test_a_wrapper_passes_the_user_s_exception_on_without_its_frames():
    loop = _Loop()
    undo = _patch.patch_method(loop, "step", lambda: None, lambda: None)
    try:
        with pytest.raises(ValueError) as caught:
            loop.step()
    finally:
        undo()
    exc = caught.value
    assert str(exc) == "the user's" and isinstance(exc.__cause__, KeyError)
    frames = _frames(exc)
    assert frames[-1] == ("test_tracebacks.py", "step"), frames
    hooks = [f for f in frames if f[0] == "_patch.py"]
    # Python 3.11 re-raises the traceback the exception carries; before, a
    # bare raise re-raises the caught one, and the wrapper's own frame stays.
    assert hooks == ([] if sys.version_info >= (3, 11) else [("_patch.py", "method")]), frames


def test_an_error_of_the_hook_s_own_keeps_its_frames():
    loop = _Loop()
    # A hook bug: an around that takes none of the arguments it is given
    # raises in the wrapper itself, and the frame says where.
    undo = _patch.patch_method(loop, "step", None, None, around=_safe.errors)
    try:
        with pytest.raises(TypeError) as caught:
            loop.step()
    finally:
        undo()
    assert _frames(caught.value)[-1] == ("_patch.py", "method_around")



@pytest.mark.parametrize("name", ["zero_grad", "step"])
@pytest.mark.parametrize("undone", [False, True], ids=["watched", "undone-under-a-wrapper"])
def test_a_watched_optimizer_s_error_shows_no_hook_frame(name, undone, torch_mod):
    # What opt.zero_grad() and (patched, not hooked) opt.step() call is the
    # Watcher's entry itself: no frame of _patch's between, and the entry's
    # own dropped from the user's traceback. Undone while another's wrapper
    # holds it, the entry only calls the method, as cleanly.
    torch = torch_mod
    boom = []

    class Opt(torch.optim.SGD):
        def zero_grad(self, *args, **kwargs):
            if boom:
                raise ValueError("the user's zero_grad")
            return super().zero_grad(*args, **kwargs)

        def step(self, closure=None):
            if boom:
                raise ValueError("the user's step")
            return super().step(closure)

    model = torch.nn.Linear(4, 2)
    opt = Opt(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config, step_hooks=False)
    ours = getattr(opt, name)
    assert ours.__self__ is opt and "_zero_grad _step_around".count(ours.func.__name__)
    if undone:
        setattr(opt, name, lambda *a, **k: ours(*a, **k))  # another's wrapper on top
        watcher.remove()
    try:
        opt.zero_grad()
        model(torch.ones(3, 4)).sum().backward()
        opt.step()
        boom.append(True)
        with pytest.raises(ValueError) as caught:
            getattr(opt, name)()
    finally:
        watcher.remove()
        client.close("done", timeout=1)
    assert str(caught.value) == "the user's %s" % name
    frames = _frames(caught.value)
    assert frames[-1] == ("test_tracebacks.py", name), frames
    hooks = [f for f in frames if f[0].startswith("_")]
    # before 3.11 a bare raise keeps the frame of the entry that re-raised
    assert hooks == [] or sys.version_info < (3, 11), frames


def test_a_zero_grad_set_on_the_instance_is_called_held_and_cleanly(torch_mod):
    # A zero_grad that is no method of the optimizer (a function set on the
    # instance before watch(), as a framework's wrapper may) is called by
    # the entry as it is, kept alive by the patch, and its error's
    # traceback shows it and no frame of the hook's.
    torch = torch_mod
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = []

    def zero_grad(*args, **kwargs):
        calls.append((args, kwargs))
        if len(calls) == 2:
            raise ValueError("the user's own zero_grad")

    opt.zero_grad = zero_grad
    del zero_grad
    client = _client.Client(make_config(), start=False)
    watcher = _watch.Watcher(torch, client, model, opt, client.config)
    try:
        opt.zero_grad(set_to_none=True)
        with pytest.raises(ValueError) as caught:
            opt.zero_grad()
    finally:
        watcher.remove()
        client.close("done", timeout=1)
    assert calls == [((), {"set_to_none": True}), ((), {})]
    frames = _frames(caught.value)
    assert frames[-1] == ("test_tracebacks.py", "zero_grad"), frames
    assert [f for f in frames if f[0].startswith("_")] == [] or sys.version_info < (3, 11), frames
    assert opt.zero_grad.__name__ == "zero_grad" and not hasattr(opt.zero_grad, "func")
