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
    raises: ``torch.func.vmap``).

    Where the bindings are wrapped (torch 1.13), ``local`` is the
    thread-local the wrappers keep their stack in; a function set as its
    ``covered`` is called at each push on that thread: the meter learns
    that its hooks were covered by someone's whose tensors it cannot see.
    Elsewhere ``local`` is None and nothing tells it. The meter's own
    pushes and pops go past the wrappers where both are in place, else
    through whatever both bindings are now, so that the stack stays
    balanced either way."""

    def __init__(self, torch):
        ag = getattr(getattr(torch, "_C", None), "_autograd", None)
        self.push, self.pop = (getattr(ag, name, None) for name in _ATTRS)
        if self.push is None or self.pop is None:
            self.push = self.pop = None
        self.enabled = getattr(ag, "_saved_tensors_hooks_is_enabled", None) or _true
        self.local = None
        top = getattr(ag, "_top_saved_tensors_default_hooks", None)
        self.exact = top is not None
        if top is not None:
            self.top = lambda: top(False)
        elif self.push is not None:
            self.local = _tracked(ag, self.push, self.pop)
            self.top = self.local.top
            push, pop = (getattr(ag, name) for name in _ATTRS)
            if (push, pop) == self.local.wrappers:  # both in place: past them
                push, pop = self.local.bindings
            self.push, self.pop = push, pop
        else:
            self.top = _none


def _true():
    return True


def _none():
    return None


class _Tracked(threading.local):
    """What the wrappers keep on each thread: ``stack``, the pairs pushed
    through them, and ``covered``, the function a push calls (or None).
    The wrappers themselves and the bindings they wrap are the same on
    every thread: attributes of the class (one per wrap)."""
    stack = ()
    covered = None
    wrappers = bindings = None  # (push, pop) of the wrap, and of what it wraps

    def top(self):
        stack = self.stack
        return stack[-1] if stack else None


def _tracked(ag, push, pop):
    """Wrap ``ag``'s push and pop bindings (once: ``push`` is the present
    one) to keep the stack of pairs pushed on each thread; return the
    :class:`_Tracked`. Pushes from before the wrap are not in it."""
    local = getattr(push, "_vramscope_tracked", None)
    if local is not None:  # wrapped before
        return local
    # a class of its own for each wrap: its attributes, the same on every
    # thread, are this wrap's
    layer = type("_Tracked", (_Tracked,), {})
    local = layer()

    def push_tracked(pack, unpack):
        push(pack, unpack)  # raises where hooks are disabled: nothing kept then
        stack = local.stack
        if not stack:
            stack = local.stack = []
        stack.append((pack, unpack))
        told = local.covered
        if told is not None:
            told()

    def pop_tracked():
        pop()
        stack = local.stack
        if stack:
            stack.pop()

    push_tracked._vramscope_tracked = local
    layer.wrappers = (push_tracked, pop_tracked)
    layer.bindings = (push, pop)
    setattr(ag, _ATTRS[0], push_tracked)
    setattr(ag, _ATTRS[1], pop_tracked)
    return local
