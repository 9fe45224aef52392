"""The process's distributed rank, from torch.distributed once it is
initialised (docs/protocol.md, ``hello``).

The environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``) is what torchrun
gives; ``torch.multiprocessing.spawn`` with ``init_process_group(rank=...)``
gives none of it, so the hello's rank is null until the process group exists.
The client asks :func:`probe`'s reader on its sender thread, never on the
training thread, and stops once it has answered.
"""

import os


def probe(torch, environ=None):
    """Return a reader of ``{"rank", "local_rank", "world_size"}`` (None
    until torch.distributed is initialised), or None where torch has no
    usable torch.distributed.

    ``local_rank`` comes from ``LOCAL_RANK`` where the launcher set it
    (torchrun does, ``mp.spawn`` does not): torch.distributed has no local
    rank of its own, and the global rank is not one.
    """
    dist = getattr(torch, "distributed", None)
    available = getattr(dist, "is_available", None)
    try:
        if not callable(available) or not available():
            return None
    except Exception:  # noqa: BLE001
        return None
    env = os.environ if environ is None else environ

    def read():
        if not dist.is_initialized():
            return None
        local = env.get("LOCAL_RANK")
        try:
            local = int(local) if local is not None else None
        except ValueError:
            local = None
        return {"rank": int(dist.get_rank()), "world_size": int(dist.get_world_size()),
                "local_rank": local if local is None or local >= 0 else None}

    return read
