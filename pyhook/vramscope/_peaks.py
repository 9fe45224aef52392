"""Exact phase peaks that leave the user's own counters alone (docs/hook.md,
"Exact peaks and your counters").

The hook resets the caching allocator's peak counters right after each read
it makes for a phase or mark message, so that read's ``peak`` figures are
exact for the interval since the previous one. Without more, that would
change what the user's own ``torch.cuda.max_memory_allocated()`` and every
other peak of ``memory_stats()`` return. So each read the hook resets after
is also kept (``pending``, one deque append on the training thread); the
sender thread folds its peaks into ``folded``, per stat, off the training
thread; and the two bindings every public function of torch.cuda.memory
reaches are patched while a hook uses them:

* ``torch._C._cuda_memoryStats`` (what ``memory_stats_as_nested_dict``,
  ``memory_stats``, ``memory_allocated``, ``max_memory_allocated``,
  ``memory_reserved``, ``max_memory_reserved``, ``memory_summary`` and the
  names torch.cuda re-exports call, in torch 1.13 and 2.x alike, looked up
  on ``torch._C`` at each call) answers torch's dict with each ``peak``
  raised to the largest one the hook reset away since the user's last
  reset (folding what is still pending first, under a lock);
* ``torch._C._cuda_resetPeakMemoryStats`` (``reset_peak_memory_stats``,
  ``reset_max_memory_allocated``, ``reset_max_memory_cached``) forgets
  the folded peaks and resets, after one read that the hook keeps for its
  own interval (its next read reports at least that peak);
* on torch 2.x, ``torch._C._accelerator_getDeviceStats`` and
  ``torch._C._accelerator_resetPeakStats`` (``torch.accelerator.memory_*``)
  the same way.

Not covered: a reference to a binding taken before the hook patched it
(``from torch._C import _cuda_memoryStats`` at import time), and C++ code
that asks the allocator itself (an extension calling
``c10::cuda::CUDACachingAllocator::getDeviceStats``): those see the peak
since the hook's last read. Everything is undone when the last hook that
uses a device releases it.
"""

import collections
import os
import threading
from itertools import repeat, starmap
from operator import itemgetter

# Up to this many reads of the current step are kept for the step's peak
# (a step makes at most a handful; a client without a Watcher never clears).
STEP_READS = 64

_lock = threading.Lock()  # guards _installs
_installs = {}  # id(torch._C) -> _Install


def peak_paths(stats, prefix=()):
    """The key paths of every stat dict that has a ``peak`` in one nested
    ``_cuda_memoryStats`` dict, in its order (e.g. ``("allocated_bytes", "all")``)."""
    paths = []
    for key, value in stats.items():
        if type(value) is dict:
            if "peak" in value:
                paths.append(prefix + (key,))
            else:
                paths.extend(peak_paths(value, prefix + (key,)))
    return paths


_PEAK = itemgetter("peak")


def _node(stats, path):
    for key in path:
        stats = stats[key]
    return stats


class DevicePeaks:
    """The hook's resets on one device and what they hide from the user.

    ``read_reset()`` is the hook's reading edge: one read, kept for the user
    view and for the step, then one reset. ``fold()`` runs on the sender.
    ``user_stats`` and ``user_reset`` are what the patched bindings answer.
    """

    def __init__(self, stats, reset, device):
        self.device = device
        self._stats = stats
        self._reset = reset
        self.lock = threading.Lock()
        self.pending = collections.deque()  # reads reset away, not yet folded
        self.folded = {}  # path -> largest peak reset away since the user's last reset
        self._paths = None
        # The current step's reads (and a user reset's read): the Watcher takes
        # the step's peak and held memory from them at the step's end.
        self.step_reads = collections.deque(maxlen=STEP_READS)
        self.clients = []  # clients told of a user's reset (Client.carry)
        self.raised = False  # the last user_stats() raised a peak
        self.read_reset = self._make_read_reset()

    def _make_read_reset(self):
        stats, reset, device = self._stats, self._reset, self.device
        pend, keep = self.pending.append, self.step_reads.append

        def read_reset():
            # Kept before the reset: a user's read from another thread in
            # between folds it (docs/hook.md, "Exact peaks and your counters").
            raw = stats(device)
            pend(raw)
            keep(raw)
            reset(device)
            return raw

        return read_reset

    def took(self, raw):
        """A read the hook made with its own reader (the first one, once CUDA
        answered): keep it and reset, as read_reset() does."""
        self.pending.append(raw)
        self.step_reads.append(raw)
        self._reset(self.device)

    def start_with(self, raw):
        """A hook starts using the device: ``raw`` (read just now) is kept for
        the user and the counters reset, so the hook's first read covers only
        the time since; the peak before stays the user's."""
        if raw:
            self.pending.append(raw)
            self._reset(self.device)

    # ---- the sender's side --------------------------------------------------------

    def fold(self):
        """Fold the pending reads' peaks into ``folded`` (the sender thread,
        each round; a user's call does it first too)."""
        if self.pending:
            with self.lock:
                self._fold_locked()

    def _fold_locked(self):
        pending = self.pending
        # As many as are there now: the training thread appends meanwhile.
        reads = list(filter(None, starmap(pending.popleft, repeat((), len(pending)))))
        if not reads:
            return
        paths = self._paths
        if paths is None:
            paths = self._paths = peak_paths(reads[0])
        folded = self.folded
        try:
            # Path by path over every read at once, in C (itemgetter maps):
            # a read's dict is picked apart by no Python frame.
            level = {}
            for path in paths:
                nodes = level.get(path[:-1])
                if nodes is None:
                    nodes = reads
                    for key in path[:-1]:
                        nodes = list(map(itemgetter(key), nodes))
                    level[path[:-1]] = nodes
                value = max(map(_PEAK, map(itemgetter(path[-1]), nodes)))
                if value > folded.get(path, -1):
                    folded[path] = value
        except (KeyError, TypeError):
            # A read without some path (or not of the first one's shape):
            # read by read, each path it has.
            for raw in reads:
                for path in paths:
                    try:
                        value = _node(raw, path)["peak"]
                    except (KeyError, TypeError):
                        continue
                    if value > folded.get(path, -1):
                        folded[path] = value

    # ---- the user's side -----------------------------------------------------------

    def user_stats(self, stats):
        """torch's dict from ``stats(device)`` with each peak raised to the
        largest one the hook reset away since the user's last reset."""
        with self.lock:
            self._fold_locked()
            live = stats(self.device)
            folded = self.folded
            raised = False
            if live and folded:
                for path, value in folded.items():
                    try:
                        node = _node(live, path)
                        if node["peak"] < value:
                            node["peak"] = value
                            raised = True
                    except (KeyError, TypeError):
                        continue
            self.raised = raised
            return live

    def caught_up(self, live):
        """True when no peak the hook reset away is above ``live``'s (torch's
        dict as it is now): torch's own counters say what the user would see."""
        with self.lock:
            self._fold_locked()
            if not live:
                return not self.folded
            for path, value in self.folded.items():
                try:
                    if _node(live, path)["peak"] < value:
                        return False
                except (KeyError, TypeError):
                    continue
            return True

    def user_reset(self, reset):
        """The user's reset: forget what was reset away and reset; the read
        made first keeps the hook's current interval whole."""
        with self.lock:
            raw = self._stats(self.device)
            reset(self.device)
            self.pending.clear()
            self.folded.clear()
        if raw:
            self.step_reads.append(raw)
            for client in list(self.clients):
                client.carry(raw)


class _Install:
    """The patched bindings of one torch and the devices whose peaks they serve."""

    def __init__(self, torch_c):
        self.c = torch_c
        self.devices = {}  # index -> [DevicePeaks, users]
        self.saved = []
        self.stats = torch_c._cuda_memoryStats
        self.reset = torch_c._cuda_resetPeakMemoryStats
        self._patch("_cuda_memoryStats", self._stats_of(self.stats))
        self._patch("_cuda_resetPeakMemoryStats", self._reset_of(self.reset))
        acc_stats = getattr(torch_c, "_accelerator_getDeviceStats", None)
        acc_reset = getattr(torch_c, "_accelerator_resetPeakStats", None)
        if callable(acc_stats) and callable(acc_reset):
            self._patch("_accelerator_getDeviceStats", self._stats_of(acc_stats))
            self._patch("_accelerator_resetPeakStats", self._reset_of(acc_reset))

    def current(self):
        """True while torch's binding is still our patch (something that
        replaced it since, a test's fake allocator, makes this install stale)."""
        return bool(self.saved) and getattr(self.c, self.saved[0][0], None) is self.patched

    def _patch(self, name, fn):
        if not self.saved:
            self.patched = fn
        self.saved.append((name, getattr(self.c, name)))
        fn.__name__ = name
        fn.__vramscope_original__ = getattr(self.c, name)
        setattr(self.c, name, fn)

    def _stats_of(self, original):
        devices = self.devices

        def memory_stats(device):
            entry = devices.get(device) if type(device) is int else None
            if entry is None:
                return original(device)
            live = entry[0].user_stats(original)
            if entry[1] == 0 and not entry[0].raised:
                self.retire(device)
            return live

        return memory_stats

    def _reset_of(self, original):
        devices = self.devices

        def reset_peak_stats(device):
            entry = devices.get(device) if type(device) is int else None
            if entry is None:
                return original(device)
            out = entry[0].user_reset(original)
            if entry[1] == 0:
                self.retire(device)
            return out

        return reset_peak_stats

    def retire(self, device):
        """Drop a device no hook uses any more; the last one undoes the patches."""
        with _lock:
            entry = self.devices.get(device)
            if entry is None or entry[1] > 0:
                return
            del self.devices[device]
            if not self.devices and self.saved:
                self.undo()
                if _installs.get(id(self.c)) is self:
                    del _installs[id(self.c)]

    def undo(self):
        for name, old in reversed(self.saved):
            setattr(self.c, name, old)
        self.saved = []


def supported(torch):
    """True where torch has both CUDA bindings the hook patches."""
    c = getattr(torch, "_C", None)
    return callable(getattr(c, "_cuda_memoryStats", None)) and \
        callable(getattr(c, "_cuda_resetPeakMemoryStats", None))


def acquire(torch, device):
    """Return the DevicePeaks of ``device`` (an int), patching torch's
    bindings on the first use; None where torch lacks them."""
    if not supported(torch):
        return None
    with _lock:
        key = id(torch._C)
        inst = _installs.get(key)
        if inst is not None and not inst.current():
            del _installs[key]  # replaced under us: start over on what is there now
            inst = None
        if inst is None:
            inst = _installs[key] = _Install(torch._C)
        entry = inst.devices.get(device)
        if entry is None:
            entry = inst.devices[device] = [DevicePeaks(inst.stats, inst.reset, device), 0]
        entry[1] += 1
        return entry[0]


def release(torch, peaks):
    """Give back one use of ``peaks``. When no hook uses the device any more,
    the patches go at once if torch's own counters already say what the user
    would see (no peak the hook reset away is above the live one), else at
    the user's next reset or once the live peaks have caught up: until then
    they keep answering as torch would without the hook."""
    with _lock:
        inst = _installs.get(id(torch._C))
        entry = inst.devices.get(peaks.device) if inst is not None else None
        if entry is None or entry[0] is not peaks:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        with peaks.lock:
            peaks.clients = []
    try:
        done = peaks.caught_up(inst.stats(peaks.device))
    except Exception:  # noqa: BLE001 - a broken device: nothing left to serve
        done = True
    if done:
        inst.retire(peaks.device)


def installed(torch):
    """True while some hook's patches are on ``torch``'s bindings."""
    return id(getattr(torch, "_C", None)) in _installs


def _after_fork_in_child():
    """A forked child (a DataLoader worker) gets fresh locks: one held by the
    parent's sender at the fork would never be released there."""
    global _lock
    _lock = threading.Lock()
    for inst in _installs.values():
        for entry in inst.devices.values():
            entry[0].lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
