"""The caching allocator at an out-of-memory error (docs/census.md, "At an
out-of-memory error"): what its cache holds, its largest free block against
the request, and whether fragmentation is why the request failed.

Segments and blocks are read from ``torch.cuda.memory_snapshot()`` where
torch has it (detected, never assumed). Their shape is the one torch
documents in ``torch/cuda/memory.py`` (``_snapshot``'s ``Segment`` and
``Block``: ``total_size``, ``blocks`` of ``size`` and ``state``, one of
``active_allocated``, ``active_awaiting_free``, ``inactive``; torch 2.1+
adds ``is_expandable`` per segment). A free block is an ``inactive`` one.
"""

from . import _messages


def state(torch, mem, requested, device_free, device_total, snapshot=None):
    """Return the ``allocator`` object of an out-of-memory census."""
    allocated = mem.get("allocated") if isinstance(mem, dict) else None
    reserved = mem.get("reserved") if isinstance(mem, dict) else None
    out = {
        "allocated": allocated, "reserved": reserved,
        "cache": reserved - allocated if allocated is not None and reserved is not None else None,
        "requested": _messages._size_or_none(requested),
        "device_free": _messages._size_or_none(device_free),
        "non_pytorch": None,
        "segments": None, "free_in_cache": None, "largest_free": None,
        "expandable": None, "fragmented": None,
    }
    if reserved is not None and device_free is not None and device_total is not None:
        used = device_total - device_free
        out["non_pytorch"] = used - reserved if used >= reserved else None
    if snapshot is None:
        take = getattr(getattr(torch, "cuda", None), "memory_snapshot", None)
        try:
            snapshot = take() if callable(take) else None
        except Exception:  # noqa: BLE001 - no snapshot: the figures stay null
            snapshot = None
    if isinstance(snapshot, dict):
        snapshot = snapshot.get("segments")
    if not isinstance(snapshot, list):
        return out
    free = largest = 0
    expandable = None
    for seg in snapshot:
        if not isinstance(seg, dict):
            continue
        if "is_expandable" in seg:
            expandable = bool(expandable) or bool(seg["is_expandable"])
        for b in seg.get("blocks") or ():
            if isinstance(b, dict) and b.get("state") == "inactive":
                size = int(b.get("size") or 0)
                free += size
                largest = max(largest, size)
    out.update(segments=len(snapshot), free_in_cache=free, largest_free=largest,
               expandable=expandable)
    req = out["requested"]
    if req is not None:
        # Enough free in the cache, in no one block: fragmentation failed it.
        out["fragmented"] = largest < req <= free
    return out
