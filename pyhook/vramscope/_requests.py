"""Requests from the monitor to the hook (docs/protocol.md, "Requests").

The monitor may write request lines back on the hook's own connection. The
sender thread reads what has arrived without waiting (``MSG_DONTWAIT``), at
most :data:`READ_LIMIT` bytes a turn, and this module splits and validates
it: a line over :data:`MAX_REQUEST` bytes, one that is not a JSON object of
protocol version 1, or one with a bad field is counted and skipped; a type
it does not know is ignored. Nothing a monitor writes can raise, block or
grow memory past these bounds.
"""

import json

MAX_REQUEST = 4096  # bytes of one request line, newline included
READ_LIMIT = 65536  # bytes read from the socket per sender turn
REASONS = ("request", "suspect")
_MAX_ID = 2 ** 53


class Reader:
    """Reader splits the monitor's bytes into validated requests."""

    def __init__(self):
        self._partial = b""
        self._skipping = False  # inside a line that is already too long
        self.valid = 0
        self.invalid = 0
        self.ignored = 0

    def feed(self, data):
        """Return the requests completed by ``data`` (a list of dicts)."""
        out = []
        while data:
            nl = data.find(b"\n")
            if nl < 0:
                if not self._skipping:
                    self._partial += data
                    if len(self._partial) >= MAX_REQUEST:
                        self._partial, self._skipping = b"", True
                        self.invalid += 1
                return out
            line, data = self._partial + data[:nl], data[nl + 1:]
            self._partial = b""
            if self._skipping:
                self._skipping = False
                continue
            if len(line) >= MAX_REQUEST:
                self.invalid += 1
                continue
            req = self._parse(line)
            if req is not None:
                out.append(req)
        return out

    def _parse(self, line):
        try:
            msg = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            self.invalid += 1
            return None
        req = validate(msg)
        if req is None:
            self.invalid += 1
        elif req is IGNORED:
            self.ignored += 1
            return None
        else:
            self.valid += 1
        return req


IGNORED = {}  # a well-formed request of a type this hook does not know


def validate(msg):
    """The request ``msg`` as ``{"type", "id", "reason"}``, :data:`IGNORED`
    for a type this hook does not know, or None when it is invalid."""
    if type(msg) is not dict or msg.get("v") != 1 or type(msg.get("type")) is not str:
        return None
    rid = msg.get("id")
    if type(rid) is not int or not 0 <= rid < _MAX_ID:
        return None
    if msg["type"] != "census":
        return IGNORED
    reason = msg.get("reason", "request")
    if reason not in REASONS:
        return None
    out = {"type": "census", "id": rid, "reason": reason}
    where = msg.get("capture_dir")
    if where is not None:
        if type(where) is not str or not where.startswith("/") or len(where.encode("utf-8", "replace")) > 1024:
            return None
        out["capture_dir"] = where
    return out
