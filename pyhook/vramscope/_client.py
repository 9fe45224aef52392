"""The client: a bounded queue fed by the training thread, a daemon sender
thread that owns the socket, replays the backlog on every (re)connection and
sends stats, and an optional daemon sampler thread.

The training thread never blocks: it reads the clock (and, at an end edge,
the allocator: torch's dict, untouched) and appends an edge to the queue, one
``deque.append`` with no lock: a plain tuple of ``_messages.Edge``'s fields,
which the sender makes an ``Edge`` (a named tuple costs the training thread
a type call and a tracked object that the collector never untracks). The
sender's work (numbering, replay, encoding, the socket) is
:mod:`_sender`'s.

The sender sleeps until ``BATCH`` messages are pending (the training thread
sets the wake event once, when the queue reaches that length) or until
``FLUSH_INTERVAL`` has passed, then handles the whole queue at once: every
wake-up is a GIL handoff and a context switch the training thread pays for,
so fewer, larger rounds cost it less than a fixed 10 ms poll. But each read's
dict (torch builds about 40 dicts a read) lives until the sender's round has
folded it and numbered its edge: at 64 messages, about seven plain steps, a
step's reads are freed before they fill Python's young generation (700
objects), whose collections would promote them and lead to full ones
(docs/hook.md, "The garbage collector").
"""

import collections
import os
import threading
import time

from . import _cuda, _messages, _requests, _safe, _sockcheck
from ._sender import CARRY, GAP, SenderMixin

QUEUE_SIZE = 8192
RING_SIZE = 4096
FIRST_SIZE = 4096
FIRST_STEPS = 3
BATCH = 64  # pending messages that wake the sender before its deadline
FLUSH_INTERVAL = 0.05  # seconds: the longest a message waits in the queue
# Queued messages past which an edge's read is kept as its six values, not
# as torch's dict (~11 KB for torch 2.3's 122 entries): the sender frees the
# dicts of the first ones; a sender held up (a monitor slow to read) leaves
# at most ~6 MB of them.
HOLD_DICTS = 1024

_monotonic = time.monotonic


class Client(SenderMixin):
    """Client streams protocol messages to one monitor socket.

    Counters (``dropped``, ``evicted``, ``send_errors``, ``connects``) are the
    ones the protocol's ``stats`` object carries.
    """

    # What the training thread's every-step paths read and write (the
    # Watcher's fast paths queue here directly), in slots side by side: a
    # dict of some 50 attributes spreads them over dozens of cache lines,
    # cold on a training step. The rest is in the instance's __dict__.
    __slots__ = ("_queue", "step", "micro", "model", "owner", "reader", "_hold",
                 "_wake_from", "_wake_at", "_wake", "last_read", "peaks", "exact",
                 "between", "__dict__", "__weakref__")

    # User phases open now (vramscope.phase): an evaluation inside one is
    # the user's phase, not an automatic one (Watcher._eval).
    user_depth = 0

    def __init__(self, config, cuda=None, torch_version=None, *, queue_size=QUEUE_SIZE,
                 ring_size=RING_SIZE, first_size=FIRST_SIZE, first_steps=FIRST_STEPS,
                 retry_interval=1.0, stats_interval=1.0, send_timeout=2.0,
                 poll_interval=FLUSH_INTERVAL, batch=BATCH, start=True, dist=None):
        self.config = config
        self.cuda = cuda
        self.session = _messages.new_session_id()
        self.step = 0
        self.micro = 0
        # A weak reference to the Watcher whose automatic phase is open (or
        # was last), and its name, carried by every automatic edge
        # (docs/hook.md, "Several models").
        self.owner = None
        self.model = None
        # The last step's closing read, as (held, peak, step), a new tuple at
        # each step's end (Watcher._plan, exact peaks only): the sampler
        # compares memory between steps with it, and its identity says that
        # no step ended since.
        self.between = None
        # The closing read of a step a watch ended as it went (Watcher.
        # _end_unupdated), for the next watch's first zero_grad: (raw, extra).
        self.pending_close = None
        self.dropped = 0
        self.evicted = 0
        self.send_errors = 0
        self.connects = 0
        self._lock = threading.Lock()
        self._next_seq = 1  # the sender's: it numbers the queue in order
        self._lost = 0  # dropped since the sender last took the queue
        self._sealed = False  # goodbye has its seq
        self._queue = collections.deque()
        self._queue_size = queue_size
        # One test at every switch below it; a switch queues up to two edges.
        self._hold_open = min(HOLD_DICTS, queue_size - 1)
        self._closed = False  # sets self._hold
        self._first = []
        self._first_size = first_size
        self._first_steps = first_steps
        self._ring = collections.deque(maxlen=ring_size)
        self._retry = retry_interval
        self._stats_interval = stats_interval
        self._send_timeout = send_timeout
        self._poll = poll_interval
        self._batch = max(1, int(batch))
        # The queue lengths at which a switch (one or two edges) brings the
        # queue to the batch, or one short of it: the edges wake the sender.
        self._wake_at = frozenset((self._batch - 2, self._batch - 1))
        self._wake_from = self._batch - 2
        self._sock = None
        self._sock_id = None  # what the socket is (_owned), to tell it from a reused number
        # Requests from the monitor (docs/protocol.md, "Requests"), read by the
        # sender thread, and the Watcher a census request arms (a weak reference).
        self.requests = _requests.Reader()
        self.census_target = None
        # Exact peaks (docs/hook.md, "Exact peaks and your counters"): every
        # read through self.reader resets the peak counters after it, the
        # user's own counters patched to stay as they were. None where torch
        # lacks the bindings (and on CPU runs): reads only, peaks may be bounds.
        self.peaks = None
        start_exact = getattr(cuda, "start_exact", None)
        if start_exact is not None:
            self.peaks = _safe.call(start_exact)
        self.exact = self.peaks is not None
        self._carry = None  # (max_allocated, max_reserved) a user's reset cut off (sender)
        self._carry_src = None  # the read that carry was applied to
        # The allocator reader (None on CPU runs): callers on the hot path
        # call it directly, guarding it as read_raw() does. With exact peaks
        # it resets after each read; read_plain() (samples, oom) never does.
        self._plain = None
        self.reader = None if cuda is None else self._reader_of(cuda)
        if self.exact:
            self.peaks.clients.append(self)
            raw = self.read_plain()
            if raw is not None and type(raw) is dict:
                _safe.call(self.peaks.start_with, raw)
        # When the training thread last read the allocator: the sampler
        # skips a sample while phase edges keep the curve fresh.
        self.last_read = 0.0
        self._stop = threading.Event()
        self._sampling = threading.Event()
        self._wake = threading.Event()
        self._sender = None
        self._sampler = None
        self._reach = _sockcheck.Reach(config.socket)
        info = _safe.call(cuda.device_info) if cuda is not None else None
        self.hello = _messages.build_hello(config, self.session, torch_version, info,
                                           exact_peaks=self.exact,
                                           mem_source=_mem_source(cuda, self.exact))
        self._hello_line = _messages.encode(self.hello)
        # Asked, on the sender thread, for the rank until torch.distributed
        # answers (_dist.probe): a process that calls init_process_group
        # after watch() sends its hello again with the rank (docs/protocol.md).
        self._dist = dist
        self._check_dist(send=False)
        if start:
            self.start()

    def _reader_of(self, cuda):
        """The first reader: ``cuda.read_raw`` (guarded: None until CUDA is
        initialised); once it has answered, ``self.reader`` becomes
        ``cuda.fast_read`` (the bare binding) where the seam has one."""
        read = getattr(cuda, "read_raw", None) or cuda.read
        self._plain = read
        fast = getattr(cuda, "fast_read", None)
        peaks = self.peaks
        if peaks is not None:
            fast = peaks.read_reset
        if fast is None:
            return read

        def read_until_ready():
            raw = read()
            if raw is not None:
                if peaks is not None:
                    peaks.took(raw)  # kept and reset, as read_reset() does
                if self.reader is read_until_ready:
                    self.reader = fast
            return raw

        return read_until_ready

    # ---- training-thread side -------------------------------------------------

    def emit(self, msg):
        """Queue ``msg`` (its ``seq`` is given by the sender); never blocks.

        Returns False when the message was dropped (queue full) or the client
        is closed. A dropped message still takes a seq, so the monitor sees a gap.
        """
        if self._shut:
            return False
        queue = self._queue
        pending = len(queue)
        if pending >= self._queue_size:
            return self._drop(1)
        queue.append(msg)
        if pending + 1 == self._batch:  # once per batch, not per message
            self._wake.set()
        return True

    def _drop(self, n):
        """Count ``n`` messages lost to a full queue: the sender leaves their
        seqs out after the messages queued before them (a gap)."""
        with self._lock:
            self.dropped += n
            self._lost += n
        return False

    def read_mem(self):
        """Return the ``mem`` object from one allocator read that resets
        nothing (oom), or None."""
        cuda = self.cuda
        if cuda is None:
            return None
        try:
            return cuda.read()
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            return None

    def read_plain(self):
        """One allocator read that resets nothing (the sampler's), compact
        form as read_raw(), or None."""
        read = self._plain
        if read is None or self._shut:
            return None
        try:
            return read()
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            return None

    def read_raw(self):
        """Return one allocator read in the queue's compact form, or None.

        A tuple from ``CudaStats.read_raw`` (made into ``mem`` on the sender
        thread), or a ``mem`` dict from a seam that only has ``read()``.
        """
        read = self.reader
        if read is None:
            return None
        try:
            return read()
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            return None

    def carry(self, raw):
        """A user's reset_peak_memory_stats() (from _peaks): the peaks it cut
        off (``raw``, read just before it) still belong to the interval the
        hook's next read closes, which the sender raises to them."""
        if self._shut:
            return
        pair = _peak_pair(raw)
        if pair is not None:
            self._queue.append({CARRY: pair})

    def phase(self, name, edge, user=False, step=None, micro=None, input=None):  # noqa: A002
        """Queue a phase edge with its own allocator read (user phases).
        ``input`` is the optional ``{"batch", "tokens"}`` of a training
        forward's begin edge."""
        raw = self.read_raw() if self.cuda is not None else None
        return self.edge(name, edge, raw, user, step, micro,
                         None if input is None else {"input": input})

    def edge(self, name, edge, raw, user=False, step=None, micro=None, extra=None, t=None):
        """Queue one phase edge (``edge``: "begin" or "end") carrying ``raw``
        (a read_raw() value, or None for ``mem: null``): :meth:`put` with
        one of its two names given. Never reads the allocator itself.
        ``t``, when given, is the edge's time (a forward end known only
        later, _training_step): the message's ``t`` through ``extra``, so
        that put() takes the clock as every edge does, at no cost to them."""
        if t is not None:
            extra = dict(extra or (), t=t)
        if edge == "end":
            return self.put(name, None, raw, False, micro, extra, None, step, user)
        return self.put(None, name, raw, False, micro, extra, None, step, user)

    def put(self, end, begin=None, raw=None, reads=False, micro=None, extra=None,
            plan=None, step=None, user=False):
        """Queue the phase edges of one switch: ``end``'s end edge, then
        ``begin``'s begin edge (either name may be None), both carrying one
        read and one clock. The one place that queues an edge: every phase
        edge of the Watcher is one call of this method, one frame
        (docs/hook.md, "Cost"). Never blocks; returns False when an edge
        was dropped (a full queue drops the begin edge first) or the client
        is closed.

        ``raw``: the read the edges carry, or with ``reads`` this client's
        own allocator read, made here and guarded as read_raw() does.
        ``plan`` (a step's closing read): called after a read that
        answered, it gives ``extra``. ``extra``: more fields for the edges
        (an end's ``span``, a forward begin's ``input``; never given with
        both names).
        ``micro``, ``step``: numbers other than the client's current ones;
        ``user``: a user phase (no ``model``).

        The training thread only takes the clock and appends an edge (a
        tuple of ``Edge``'s fields) to the deque (atomic under the GIL: no lock, no seq); the sender numbers
        the queue in its order and makes the message when it encodes it.
        """
        if reads:
            read = self.reader
            if read is not None:
                try:
                    raw = read()
                except Exception as exc:  # noqa: BLE001
                    _safe.report(exc)
                if plan is not None and raw is not None:
                    extra = plan()
        t = _monotonic()
        if raw is not None:
            self.last_read = t
        queue = self._queue
        pending = len(queue)
        if pending >= self._hold:  # a long queue, or a closed client (_hold -1)
            if self._shut:
                return False
            raw = _compact(raw)
            n = (end is not None) + (begin is not None)
            if pending + n > self._queue_size:
                if pending >= self._queue_size or begin is None:
                    return self._drop(n)
                # Room for the end edge only: it is queued, the begin dropped.
                self._drop(1)
                return self.put(end, None, raw, False, micro, extra, None, step, user) \
                    and False
        if step is None:
            step = self.step
        if micro is None:
            micro = self.micro
        model = self.model  # a user phase's edge carries none (phase_message)
        if end is not None:
            queue.append((t, end, step, micro, "end", user, raw, extra, model))
        if begin is not None:
            queue.append((t, begin, step, micro, "begin", user, raw, extra, model))
        if pending in self._wake_at:  # about once per batch, not per edge
            self._wake.set()
        return True

    def switch(self, end, begin, reads=False, extra=None, plan=None):
        """put()'s every-step case, with fewer tests: the edges of an
        automatic phase switch at this client's step and micro-step, with
        this client's own read when ``reads`` (a breakdown step, a step's
        closing edge), guarded as put() guards it; ``plan`` as put()'s."""
        queue = self._queue
        if not reads:
            # One tuple for both edges (_messages.SWITCH_FIELDS); the sender
            # makes the Edges.
            pending = len(queue)
            if pending >= self._hold:  # a long queue or a closed client: put() decides
                return self.put(end, begin, None, False, None, extra)
            queue.append((_monotonic(), end, begin, self.step, self.micro, extra, self.model))
            if pending in self._wake_at:
                self._wake.set()
            return True
        raw = None
        read = self.reader
        if read is not None:
            try:
                raw = read()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
            if plan is not None and raw is not None:
                extra = plan()
        t = _monotonic()
        if raw is not None:
            self.last_read = t
        pending = len(queue)
        if pending >= self._hold:  # a long queue or a closed client: put() decides
            return self.put(end, begin, raw, False, None, extra)
        step, micro, model = self.step, self.micro, self.model
        if end is not None:
            queue.append((t, end, step, micro, "end", False, raw, extra, model))
        if begin is not None:
            queue.append((t, begin, step, micro, "begin", False, raw, extra, model))
        # A step's closing read: the Watcher's fast paths queued the step's
        # other edges without a test, so the queue may have passed the batch
        # (set once: until the sender wakes, the next steps find it set).
        if pending >= self._wake_from and not self._wake.is_set():
            self._wake.set()
        return True

    def mark(self, name):
        """Queue a point event with its allocator snapshot (a read that, with
        exact peaks, resets as a phase edge's does)."""
        mem = _messages.mem_of(self.read_raw()) if self.cuda is not None else None
        return self.emit({"v": 1, "type": "mark", "seq": None, "t": time.monotonic(),
                          "name": name, "step": self.step, "mem": mem})

    def anatomy(self, step, figures):
        """Queue an anatomy message for ``step`` (figures as in docs/anatomy.md)."""
        msg = {"v": 1, "type": "anatomy", "seq": None, "t": time.monotonic(), "step": step}
        msg.update(figures)
        return self.emit(msg)

    def stats(self, created=None):
        """Return the health counters as the protocol's ``stats`` object.

        ``created`` (messages made, sent or not, hello included): the seqs
        the sender gave out, plus what waits in the queue and what was lost
        to it since the sender last took the queue.
        """
        if created is None:
            waiting = sum(map(_messages.count, list(self._queue)))
            created = self._next_seq + waiting + self._lost
        return {
            "created": created,
            "dropped": self.dropped,
            "evicted": self.evicted,
            "send_errors": self.send_errors,
            "connects": self.connects,
        }

    def _emit_counted(self, kind, extra, final=False):
        """Queue ``stats`` or (``final``) ``goodbye``: its ``stats`` object is
        filled in by the sender with its seq; nothing is queued after goodbye."""
        with self._lock:
            if self._shut:
                return False
            msg = {"v": 1, "type": kind, "seq": None, "t": time.monotonic()}
            msg.update(extra)
            msg["stats"] = None
            # Queued even into a full queue, after the drops counted so far:
            # their seqs go before it (the sender reads and removes this).
            msg[GAP] = self._lost
            self._lost = 0
            self._queue.append(msg)
            if final:
                self._closed = True
        return True

    # ---- lifecycle -------------------------------------------------------------

    def start(self):
        """Start the sender thread, and the sampler when CUDA is present."""
        self._sender = threading.Thread(target=self._run_sender, name="vramscope-sender",
                                        daemon=True)
        self._sender.start()
        self.start_sampler()

    def start_sampler(self):
        """Start the sampler thread when CUDA is present and sampling is on."""
        if self.cuda is not None and self.config.sample_hz > 0:
            self._sampling.set()
            self._sampler = threading.Thread(target=self._run_sampler,
                                             name="vramscope-sampler", daemon=True)
            self._sampler.start()

    @property
    def _closed(self):
        """True once goodbye was queued (or the client was disabled); the
        client's own reads use ``_shut``, a frame less."""
        return self._shut

    @_closed.setter
    def _closed(self, value):
        # A closed client's hold is below any queue length: put() finds it
        # closed behind the one test it makes at every switch anyway.
        self._shut = value
        self._hold = -1 if value else self._hold_open

    @property
    def closed(self):
        """True once goodbye was queued (or the client was disabled)."""
        return self._shut

    def close(self, reason, timeout=0.5):
        """Queue ``goodbye``, flush for at most ``timeout`` seconds, stop
        threads; give the exact-peaks patches back (no read after this)."""
        if self._shut:
            return
        self._sampling.clear()
        if self.peaks is not None:
            self.reader = None
            _safe.call(self.cuda.stop_exact, self.peaks)
        self._emit_counted("goodbye", {"reason": reason}, final=True)
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        for thread in (self._sampler, self._sender):
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def after_fork_in_child(self):
        """Disable this client in a forked child: no threads, parent's socket closed."""
        self._closed = True
        self.reader = None  # the parent's CUDA is not this child's to read
        self._lock = threading.Lock()
        self._sampling.clear()
        # Closes the child's copy only (the parent keeps its connection), and
        # only while the number is still the hook's socket.
        self._disconnect()

    # ---- sampler thread ----------------------------------------------------------

    def _run_sampler(self):
        """Send a sample when no phase edge read the allocator for a period.

        While edges come faster than ``sample_hz`` (short steps) the sampler
        reads nothing and never competes for the GIL; in long phases (or
        between steps) it fills the curve at ``sample_hz``.

        Between steps it also tells the watch whose phases this client
        carries (``owner``) when memory rose there with nothing of the
        hook's open (Watcher.saw_between): its peak would otherwise count
        as the next step's. The allocator's peak is sticky, so one sample
        after that memory was taken sees it.
        """
        period = 1.0 / self.config.sample_hz
        wait = period
        while self._sampling.is_set() and not self._stop.wait(wait):
            idle = time.monotonic() - self.last_read
            if idle < period:
                wait = period - idle
                continue
            wait = period
            owner = self.owner
            watch = owner() if owner is not None else None
            token = self.between
            quiet = watch is not None and _safe.call(watch.quiet_between, token)
            mem = _messages.mem_of(self.read_plain())
            self.last_read = time.monotonic()
            if mem is not None and self._sampling.is_set():
                self.emit({"v": 1, "type": "sample", "seq": None, "t": time.monotonic(),
                           "mem": mem})
                if quiet:  # quiet before the read, and (asked there) after it
                    _safe.call(watch.saw_between, token, mem["max_allocated"])
            # Not held through the wait: a watch whose model the loop dropped
            # goes with it (the owner is a weak reference).
            watch = None

def _mem_source(cuda, exact):
    """The hello's ``mem_source`` (docs/protocol.md, "Memory sources"): the
    seam's ``source`` with ``peaks`` saying what this client's reads give."""
    source = getattr(cuda, "source", None)
    if type(source) is not dict or not source.get("kind"):
        return None
    source = dict(source)
    if exact:
        source["peaks"] = "exact"
    elif source.get("peaks") == "exact":  # the resets could not start
        source["peaks"] = "process" if source["kind"] == "cpu" else "counter"
    return source


def _peak_pair(raw):
    """``(max_allocated, max_reserved)`` of one read, or None."""
    mem = _messages.mem_of(raw)
    if mem is None:
        return None
    return mem["max_allocated"], mem["max_reserved"]


def _compact(raw):
    """``raw`` with the binding's dict replaced by its six values."""
    return _cuda.compact(raw) if type(raw) is dict else raw

