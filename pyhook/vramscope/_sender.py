"""The client's sender thread (:class:`SenderMixin`, mixed into
:class:`_client.Client`): it numbers what the training thread queued, keeps
it for replay, connects, encodes and sends, and reads what the monitor asks.
Nothing here runs on the training thread.

The sender numbers the queue in its order, so queue order is seq order
across threads (the monitor's duplicate detection relies on it), and leaves
the seqs of messages dropped at a full queue out after those queued before
them. Picking the allocator's values, making the message, JSON encoding and
all socket I/O happen here. Before a monitor first connects, the messages
are kept as they are and encoded only if one ever does; after, they are
encoded as they come, so a reconnect only sends lines.
"""

import collections
import itertools
import os
import select
import socket
import time

from . import _cuda, _messages, _owned, _requests, _safe
from ._messages import SWITCH_FIELDS, make_edge

# Keys of a queued dict that are no message field: the drops counted before
# a stats or goodbye (their seqs go before it), and a user's reset of the
# peaks, which raises the next read's (Client.carry).
GAP = "_vramscope_gap"
CARRY = "_vramscope_carry"


class SenderMixin:
    """The sender thread's methods of the Client (which defines the queue,
    the stores, the socket state and the counters they use)."""

    __slots__ = ()

    def _number(self, n, lost):
        """Take the ``n`` oldest queued items and give them their seqs, then
        leave ``lost`` seqs out (the messages dropped after them). Returns
        ``(first, msg)`` pairs: a queued tuple becomes the ``(seq, fields)``
        pair that _messages.phase_messages takes (a switch's two edges take
        seq and seq + 1); a dict gets its seq (and a stats/goodbye its
        stats)."""
        queue = self._queue
        popleft = queue.popleft
        seq = self._next_seq
        fs = self._first_steps
        out = []
        for _ in range(n):
            item = popleft()
            if self._sealed:
                continue  # after goodbye (a racing thread): the stream has ended
            if type(item) is tuple:
                # An edge, queued as a plain tuple of Edge's fields, or a
                # switch's two edges in one tuple (no read): numbered as it
                # is, made into messages only if it is ever encoded.
                if len(item) == SWITCH_FIELDS:
                    out.append((item[3] < fs, (seq, item)))
                    if item[1] is not None and item[2] is not None:
                        seq += 1  # _messages.count: a switch's two edges
                    elif item[1] is None and item[2] is None:
                        seq -= 1
                else:
                    raw = item[6]
                    if raw is not None:
                        if self._carry is not None:
                            item = self._carried(make_edge(item))
                        elif type(raw) is dict and "allocated" not in raw:
                            # torch's whole dict: its six values are all that
                            # a line or the kept store needs (_cuda.compact)
                            item = item[:6] + (_cuda.compact(raw),) + item[7:]
                    out.append((item[2] < fs, (seq, item)))
            elif CARRY in item:  # a user's reset: no message, no seq
                self._carry = _max_pair(self._carry, item[CARRY])
                self._carry_src = None
                continue
            else:
                if self._carry is not None and type(item.get("mem")) is dict:
                    item["mem"] = _raised(item["mem"], self._carry)
                    if item.get("type") == "mark":  # a reset read: the interval ends
                        self._carry = None
                if GAP in item:
                    seq += item.pop(GAP)
                item["seq"] = seq
                if "stats" in item and item["stats"] is None:
                    item["stats"] = self.stats(created=seq + 1)
                    if item["type"] == "goodbye":
                        self._sealed = True
                step = item.get("step")
                out.append(((step if type(step) is int else self.step) < fs, item))
            seq += 1
        self._next_seq = seq + lost
        return out


    def _run_sender(self):
        next_connect = 0.0
        last_stats = time.monotonic()
        while True:
            stopping = self._stop.is_set()
            try:
                if self._dist is not None:
                    self._check_dist(send=True)
                now = time.monotonic()
                if self._sock is None and (now >= next_connect or stopping):
                    next_connect = now + self._retry
                    self._connect()
                if (self._sock is not None and not stopping
                        and now - last_stats >= self._stats_interval):
                    last_stats = now
                    self._emit_counted("stats", {})
                self._drain()
                if self._sock is not None and not stopping:
                    self._read_requests()
            except Exception as exc:  # noqa: BLE001 - the sender must never die
                _safe.report(exc)
            if stopping:
                break
            self._wake.wait(self._poll)
            self._wake.clear()
        self._disconnect()

    def _connect(self):
        if os.getpid() != self._hello_pid():
            return
        if not self._reach.allowed():
            return
        # Far above the process's own numbers (_owned.lift), from its first
        # system call on.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM,
                             fileno=_owned.lift(socket.socket(socket.AF_UNIX,
                                                              socket.SOCK_STREAM).detach()))
        sock.settimeout(self._send_timeout)
        try:
            sock.connect(self.config.socket)
        except OSError as exc:
            sock.close()
            self._reach.failed(exc)
            return
        if not self._reach.connected(sock):
            sock.close()
            return
        sock.setblocking(False)  # _send waits for room itself, then checks the number
        self._sock = sock
        self._sock_id = _owned.identity(sock.fileno())
        self.connects += 1
        # What was kept before the first connect is encoded once, here, and
        # kept encoded: a later reconnect sends lines and encodes nothing.
        self._first = self._encoded(self._first)
        self._ring = collections.deque(self._encoded(self._ring), maxlen=self._ring.maxlen)
        backlog = sorted(self._first + list(self._ring), key=lambda item: item[0])
        self._send(b"".join([self._hello_line] + [line for _, line in backlog]))

    def _encoded(self, kept):
        """``kept``'s (seq, message or line) pairs as (seq, line), without
        the messages that cannot be encoded."""
        if all(type(k) is bytes for _, k in kept):
            return list(kept)
        encode = self._encode
        pairs = [(seq, k if type(k) is bytes else encode(k)) for seq, k in kept]
        return [pair for pair in pairs if pair[1] is not None]

    def _check_dist(self, send):
        """Ask torch.distributed for the rank; once it answers, stop asking and,
        when that changes the hello, rebuild it (and with ``send`` and a
        monitor connected, send it again: the monitor takes a hello on an
        open connection as the process's identity from then on)."""
        probe = self._dist
        if probe is None:
            return
        try:
            ranks = probe()
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            self._dist = None
            return
        if ranks is None:
            return
        self._dist = None
        hello = dict(self.hello)
        hello.update(ranks)
        if hello == self.hello:
            return
        self.hello = hello
        self._hello_line = _messages.encode(hello)
        if send and self._sock is not None:
            self._send(self._hello_line)

    def _hello_pid(self):
        return self.hello["pid"]

    def _carried(self, item):
        """A queued edge whose read closes the interval a user's reset cut:
        its peaks raised to what the reset cut off. The begin edge that
        repeats the same read gets the same; the next read starts anew."""
        raw = item.raw
        if self._carry_src is not None and raw is not self._carry_src:
            self._carry = self._carry_src = None
            return item
        self._carry_src = raw
        if type(raw) is dict and "allocated" in raw:  # a mem dict (a seam with read() only)
            return item._replace(raw=_raised(raw, self._carry))
        values = _cuda.compact(raw) if type(raw) is dict else raw
        if values is None:
            return item
        a, r = self._carry
        values = (values[0], max(values[1], a), values[2], max(values[3], r)) + tuple(values[4:])
        return item._replace(raw=values)

    def _drain(self):
        peaks = self.peaks
        if peaks is not None:
            peaks.fold()  # the user's view of the peaks reset away, off the training thread
        while True:
            with self._lock:  # the queue's length and the drops before its end
                n, lost = len(self._queue), self._lost
                self._lost = 0
            if not n:
                self._next_seq += lost
                return
            items = self._number(n, lost)
            if self._sock is None and not self.connects:
                # No monitor yet: keep the messages as they are (a read as
                # its six values, _number) and encode them only if one
                # connects (most never are). Once a monitor was reached,
                # messages are encoded here as they come, connected or not,
                # so that a reconnect (to a monitor stopped for a while,
                # say) only sends lines.
                self._keep_all(items, [msg for _, msg in items])
                continue
            try:
                lines = [_messages.encode_item(msg) for _, msg in items]
            except (TypeError, ValueError):  # rare: find and report the bad ones
                encode = self._encode
                lines = [encode(msg) for _, msg in items]
            self._keep_all(items, lines)
            if self._sock is None:
                continue
            data = b"".join([line for line in lines if line is not None])
            if data:
                self._send(data)

    @staticmethod
    def _encode(msg):
        try:
            return _messages.encode_item(msg)
        except (TypeError, ValueError) as exc:
            _safe.report(exc)
            return None

    def _keep_all(self, items, kept):
        """Keep each message's line (or its dict while not connected) for replay.

        ``kept[i]`` belongs to ``items[i]``; a None line (refused) is not kept.
        Messages of the first steps go to their own store while it has room,
        the rest to the ring; one pushed out of the ring while no monitor
        listens counts in ``evicted``.
        """
        # A phase edge is still the training thread's Edge, as (seq, Edge): it
        # becomes a message only if a monitor ever connects.
        pairs = [(msg[0] if type(msg) is tuple else msg["seq"], k)
                 for (_, msg), k in zip(items, kept) if k is not None]
        if any([first for first, _ in items]):
            store, room = self._first, self._first_size - len(self._first)
            flags = [first for (first, _), k in zip(items, kept) if k is not None]
            rest = []
            for first, pair in zip(flags, pairs):
                if first and room > 0:
                    store.append(pair)
                    room -= 1
                else:
                    rest.append(pair)
            pairs = rest
        ring = self._ring
        over = len(ring) + len(pairs) - ring.maxlen
        if over > 0 and self._sock is None:
            # the messages of the entries pushed out (_messages.count: a
            # switch's are two, a line's its lines)
            evicted = 0
            for _, k in itertools.islice(itertools.chain(ring, pairs), over):
                if type(k) is tuple:
                    f = k[1]
                    evicted += 1 if len(f) != SWITCH_FIELDS \
                        else (f[1] is not None) + (f[2] is not None)
                else:
                    evicted += _messages.count(k)
            self.evicted += evicted
        ring.extend(pairs)

    def _read_requests(self):
        """Take what the monitor wrote back, without waiting, and arm the
        census each valid request asks for (sender thread)."""
        sock = self._sock  # non-blocking: recv() never waits
        try:
            if _owned.identity(sock.fileno()) != self._sock_id:
                return  # the number is the process's own file now: never read it
            data = sock.recv(_requests.READ_LIMIT, socket.MSG_DONTWAIT)
        except OSError:
            return  # nothing there, or a broken connection (the next send shows it)
        if not data:
            return
        for req in self.requests.feed(data):
            w = self.census_target() if self.census_target is not None else None
            if w is not None:
                w.request_census(req["reason"], req["id"], capture_dir=req.get("capture_dir"))

    def _send(self, data):
        """Send all of ``data``, or count an error and disconnect: the socket
        is not the hook's any more, the monitor went, or it took nothing for
        ``send_timeout`` seconds. The number is checked right before each
        send, after any wait for room: a socket the process closed while the
        sender waited may have given its number to one of the process's own
        files (socket.sendall checks nothing between its wait and its send)."""
        sock = self._sock
        fd = sock.fileno()
        view = memoryview(data)
        deadline = time.monotonic() + self._send_timeout
        while view:
            if _owned.identity(fd) != self._sock_id:
                # The process closed our socket and its number is one of its
                # own files now: never write there (_disconnect never closes it).
                break
            try:
                sent = sock.send(view, _SEND_FLAGS)
            except BlockingIOError:
                sent = 0
            except OSError:
                break
            view = view[sent:]
            if view and not sent and not _writable(sock, deadline - time.monotonic()):
                break  # no room for send_timeout: a monitor that stopped reading
        else:
            return
        self.send_errors += 1
        self._disconnect()

    def _disconnect(self):
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if _owned.identity(sock.fileno()) != self._sock_id:
            sock.detach()  # the number is the process's own file now
            return
        try:
            sock.close()
        except OSError:
            pass


# No SIGPIPE when the monitor has gone: a process that set SIGPIPE back to
# its default would die of it (Linux; macOS has no such flag).
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


def _writable(sock, timeout):
    """Whether ``sock`` has room to send within ``timeout`` seconds."""
    if timeout <= 0:
        return False
    poll = getattr(select, "poll", None)
    if poll is None:
        return bool(select.select([], [sock], [], timeout)[1])
    p = poll()
    p.register(sock, select.POLLOUT)
    return bool(p.poll(timeout * 1000))


def _max_pair(a, b):
    return b if a is None else (max(a[0], b[0]), max(a[1], b[1]))


def _raised(mem, carry):
    """A copy of ``mem`` with its peaks raised to ``carry``."""
    mem = dict(mem)
    mem["max_allocated"] = max(mem["max_allocated"], carry[0])
    mem["max_reserved"] = max(mem["max_reserved"], carry[1])
    return mem

