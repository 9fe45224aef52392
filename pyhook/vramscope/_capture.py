"""Deep capture on suspicion (CUDA; docs/census.md, "Deep capture"): the
caching allocator's history for the window between a census asked on
suspicion and its follow-up, dumped to a file beside the recording, and the
allocation sites whose live bytes grew in that window.

Uses ``torch.cuda.memory._record_memory_history`` and ``_snapshot``
(detected, never assumed; torch 2.1+ takes ``max_entries``). The snapshot's
shape is torch's own (``torch/cuda/memory.py``, ``_snapshot``'s docstring:
``segments``, and ``device_traces``, one list per device of trace entries
with ``action`` (``alloc``, ``free_requested``, ``free_completed``,
``segment_alloc``, ...), ``addr``, ``size`` and ``frames`` of
``{filename, line, name}``, innermost first). The file is that dict
pickled, as ``_dump_snapshot`` writes it, so pytorch.org/memory_viz and
``torch.cuda._memory_viz`` open it; the hook writes it itself, created 0600
without following a link. A recording the user started is left alone.
"""

import os
import pickle
import time

from . import _holders, _messages

MAX_ENTRIES = 100000  # trace entries the allocator keeps at most
MAX_SITES = 8


def supported(torch):
    """Whether this torch can record the allocator's history."""
    mem = getattr(getattr(torch, "cuda", None), "memory", None)
    return callable(getattr(mem, "_record_memory_history", None)) \
        and callable(getattr(mem, "_snapshot", None))


def _site(frames):
    """The allocation's site: its innermost frame in the user's own code,
    else its innermost frame."""
    first = None
    for f in frames or ():
        if not isinstance(f, dict):
            continue
        name = f.get("filename")
        if not isinstance(name, str) or name == "??":
            continue
        if first is None:
            first = f
        if not name.startswith(_holders._LIBRARY_DIRS) and "/torch/" not in name:
            return f
    return first


def grown_sites(snapshot, limit=MAX_SITES):
    """The sites whose allocations made in the trace are still live at its
    end, most bytes first: ``[{file, line, function, bytes, count}]``."""
    live = {}
    for trace in (snapshot or {}).get("device_traces") or ():
        for e in trace or ():
            if not isinstance(e, dict):
                continue
            action, addr = e.get("action"), e.get("addr")
            if action == "alloc":
                live[addr] = (int(e.get("size") or 0), _site(e.get("frames")))
            elif action in ("free_requested", "free_completed"):
                live.pop(addr, None)
    sites = {}
    for size, f in live.values():
        key = (f.get("filename"), f.get("line"), f.get("name")) if f else (None, None, None)
        s = sites.setdefault(key, [0, 0])
        s[0] += size
        s[1] += 1
    out = [{"file": _messages.clip(k[0], 1024) if k[0] else None,
            "line": k[1] if isinstance(k[1], int) and k[1] > 0 else None,
            "function": _messages.clip(k[2], 256) if k[2] else None,
            "bytes": v[0], "count": v[1]} for k, v in sites.items()]
    out.sort(key=lambda s: (-s["bytes"], s["file"] or "", s["line"] or 0))
    return out[:limit]


def private_dir(path):
    """Whether ``path`` is an absolute directory of this user that no one
    else may write to (where the hook may create its file)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    import stat
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def write(path, snapshot):
    """Pickle ``snapshot`` into a new file at ``path`` (0600, no link followed)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as f:
        pickle.dump(snapshot, f)


class Capture:
    """One window of the allocator's history."""

    def __init__(self, torch, directory, name, max_entries=MAX_ENTRIES):
        self.mem = torch.cuda.memory
        self.torch = torch
        self.directory = directory
        self.name = name
        self.max_entries = max_entries
        self.started = None
        self.start_ms = 0.0

    def start(self, step):
        """Switch the history on; False when it is on already (the user's) or fails."""
        enabled = getattr(getattr(self.torch, "_C", None), "_cuda_isHistoryEnabled", None)
        if callable(enabled) and enabled():
            return False
        t0 = time.perf_counter()
        record = self.mem._record_memory_history
        try:
            # Python frames only: what the sites need, and the cheaper stacks
            # (a step of the seed MLP on an H200: 1.84 ms in the window
            # against 1.58 outside, testdata/snapshots/README.md).
            record("all", max_entries=self.max_entries, stacks="python")
        except TypeError:
            try:
                record("all", max_entries=self.max_entries)
            except TypeError:  # a torch without max_entries: no bounded capture
                return False
        self.start_ms = (time.perf_counter() - t0) * 1000
        self.started = step
        return True

    def finish(self, step):
        """Take the snapshot, switch the history off, write the file; the
        census's ``capture`` object."""
        t0 = time.perf_counter()
        try:
            snap = self.mem._snapshot()
        finally:
            self.mem._record_memory_history(None)
        entries = sum(len(t or ()) for t in snap.get("device_traces") or ())
        path = os.path.join(self.directory, "vramscope-snapshot-%s-steps%d-%d.pickle"
                            % (self.name, self.started, step))
        written = None
        if private_dir(self.directory):
            write(path, snap)
            written = path
        sites = grown_sites(snap)
        return {"file": _messages.clip(written, 1024) if written else None,
                "from_step": self.started, "to_step": step, "entries": entries,
                "max_entries": self.max_entries, "sites": sites,
                "cost_ms": round(self.start_ms + (time.perf_counter() - t0) * 1000, 3)}
