"""The saved-tensor hooks in force on a thread (docs/anatomy.md, "Under a
user's own saved-tensor hooks"): the pair the activation meter's hooks go
on top of, and the bindings it pushes and pops its own by.

``torch.autograd.graph.saved_tensors_hooks`` (and ``save_on_cpu``, and the
non-reentrant ``torch.utils.checkpoint``) push a pack and an unpack hook on
a per-thread stack, and autograd applies only the top pair. torch >= 2.0
says which pair that is (``_top_saved_tensors_default_hooks``). torch 1.13
cannot; there the two bindings every context enters and exits by are
wrapped, once per process, to keep the same stack per thread. The wrappers
call the bindings first and pass everything through, so what torch does is
unchanged. That stack is only as good as the wrappers' hold on the
bindings (a context entered before them, or a binding replaced after them,
is missed), so on torch 1.13 the meter never calls a pack it was told of:
it steps aside (``SavedHooks.exact``)."""

import threading

_ATTRS = ("_push_saved_tensors_default_hooks", "_pop_saved_tensors_default_hooks")


class SavedHooks:
    """The saved-tensor-hook bindings of one torch: ``push`` and ``pop``
    (None where torch has none), ``top()`` (the pair in force on this
    thread, or None; torch's own answer where ``exact``, else the tracked
    stack's) and ``enabled()`` (False inside
    ``torch.autograd.graph.disable_saved_tensors_hooks``, where a push
    raises: ``torch.func.vmap``). The meter pushes and pops its own by
    ``push`` and ``pop``, both through the wrappers or neither, so that
    the tracked stack stays balanced."""

    # Where the bindings are wrapped (torch 1.13), ``covered(fn)`` sets a
    # function called at each push on this thread until ``covered(None)``:
    # the meter learns that its hooks were covered by someone's whose
    # tensors it cannot see. Elsewhere nothing tells it.
    covered = staticmethod(lambda fn: None)

    def __init__(self, torch):
        ag = getattr(getattr(torch, "_C", None), "_autograd", None)
        self.push, self.pop = (getattr(ag, name, None) for name in _ATTRS)
        if self.push is None or self.pop is None:
            self.push = self.pop = None
        self.enabled = getattr(ag, "_saved_tensors_hooks_is_enabled", None) or _true
        top = getattr(ag, "_top_saved_tensors_default_hooks", None)
        self.exact = top is not None
        if top is not None:
            self.top = lambda: top(False)
        elif self.push is not None:
            self.top, self.covered = _tracked(ag, self.push, self.pop)
            self.push, self.pop = (getattr(ag, name) for name in _ATTRS)
        else:
            self.top = _none


def _true():
    return True


def _none():
    return None


def _tracked(ag, push, pop):
    """Wrap ``ag``'s push and pop bindings (once) to keep the stack of
    pairs pushed on each thread; return the function that gives the top of
    this thread's, and the one that sets what a push calls on this thread
    (SavedHooks.covered). Pushes from before the wrap are not in it."""
    if getattr(push, "_vramscope_top", None) is not None:  # wrapped before
        return push._vramscope_top, push._vramscope_covered
    local = threading.local()

    def push_tracked(pack, unpack):
        push(pack, unpack)  # raises where hooks are disabled: nothing kept then
        stack = getattr(local, "stack", None)
        if stack is None:
            stack = local.stack = []
        stack.append((pack, unpack))
        told = getattr(local, "covered", None)
        if told is not None:
            told()

    def covered(fn):
        local.covered = fn

    def pop_tracked():
        pop()
        stack = getattr(local, "stack", None)
        if stack:
            stack.pop()

    def top():
        stack = getattr(local, "stack", None)
        return stack[-1] if stack else None

    push_tracked._vramscope_top = top
    push_tracked._vramscope_covered = covered
    setattr(ag, _ATTRS[0], push_tracked)
    setattr(ag, _ATTRS[1], pop_tracked)
    return top, covered
