"""Builds protocol-v1 messages (docs/protocol.md) and encodes them as lines."""

import collections
import functools
import json
from json.encoder import encode_basestring
import os
import secrets
import socket as _socket
import sys
import time

from ._cuda import MEM_KEYS, mem_from_raw
from ._job import read_job
from ._version import __version__ as VERSION

PROTOCOL = 1
MAX_LINE = 65536  # bytes, newline included
MAX_STRING = 4096
MAX_NAME = 64
MAX_ARGV = 32
MAX_ARG = 256


def clip(text, limit):
    """Return ``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary.

    Characters that UTF-8 cannot carry (lone surrogates from undecodable argv
    bytes) become ``?``, so the result always encodes.
    """
    raw = str(text).encode("utf-8", "replace")
    if len(raw) <= limit:
        return raw.decode("utf-8")
    return raw[:limit].decode("utf-8", "ignore")


def watch_name(text):
    """Return a watch's name as the protocol carries it (docs/protocol.md,
    ``model``): at most 64 UTF-8 bytes, control characters as ``?``, never
    empty (``"model"``)."""
    text = "".join("?" if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in str(text))
    text = clip(text, MAX_NAME).strip()
    return text or "model"


def read_nspid(path="/proc/self/status"):
    """Return the NSpid list from ``path``, or None where the kernel has none."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    pids = [int(x) for x in line.split()[1:]]
                    return pids if pids and all(p > 0 for p in pids) else None
    except (OSError, ValueError):
        return None
    return None


def _env_int(environ, name):
    raw = environ.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


def build_hello(config, session, torch_version, cuda_info, now=None, environ=None,
                argv=None, exact_peaks=False, mem_source=None):
    """Return the hello message (seq 0) for this process. ``exact_peaks``:
    the hook resets the peak counters after each phase or mark read
    (docs/protocol.md, "Exact peaks"); ``reset_peaks`` is retired (false).
    ``mem_source``: which memory ``mem`` reads (docs/protocol.md, "Memory
    sources"), left out when None. ``job``: the launcher's or scheduler's
    job as ``environ`` names it (docs/protocol.md, "Job identity"), read
    here, once per hello."""
    env = os.environ if environ is None else environ
    mono = time.monotonic() if now is None else now
    msg = {
        "v": PROTOCOL, "type": "hello", "seq": 0, "t": mono,
        "session": session,
        "pid": os.getpid(),
    }
    nspid = read_nspid()
    if nspid is not None:
        msg["nspid"] = nspid
    msg.update({
        "host": clip(_socket.gethostname(), MAX_STRING),
        "argv": [clip(a, MAX_ARG) for a in (sys.argv if argv is None else argv)[:MAX_ARGV]],
        "rank": _env_int(env, "RANK"),
        "local_rank": _env_int(env, "LOCAL_RANK"),
        "world_size": _env_int(env, "WORLD_SIZE"),
        "torch": clip(torch_version, MAX_STRING) if torch_version is not None else None,
        "cuda": cuda_info,
        "clock": {"mono": mono, "wall": time.time()},
        "hook": {
            "version": VERSION,
            "sample_hz": float(config.sample_hz),
            "reset_peaks": False,
            "activations_every": int(config.activations_every),
            "exact_peaks": bool(exact_peaks),
        },
    })
    if mem_source is not None:
        msg["mem_source"] = mem_source
    job = read_job(env)
    if job is not None:
        msg["job"] = job
    return msg


def new_session_id():
    """Return a random session id (16 hex characters)."""
    return secrets.token_hex(8)


def mem_of(raw):
    """Return the ``mem`` object of an allocator read: a ``read_raw()`` tuple,
    the binding's nested dict, a ``mem`` dict (seams with only ``read()``),
    or None."""
    if raw is None or (type(raw) is dict and "allocated" in raw):
        return raw
    return mem_from_raw(raw)


# A phase edge as the training thread queues it (Client.put): what the
# ``phase`` message will say, its read still in the form the reader gave
# (``raw``: torch's dict, six values, a ``mem`` dict or None), ``extra`` the
# message's further fields (``input``, ``span``...) or None, and ``model``
# the watch's name (not sent for a user phase). The sender numbers it and
# makes the message (phase_message) only when it is encoded.
Edge = collections.namedtuple("Edge", "t name step micro edge user raw extra model")
# Makes an Edge from a tuple of its fields with no Python frame (a
# namedtuple's own constructor is a Python function).
make_edge = functools.partial(tuple.__new__, Edge)

# A switch that reads nothing, as the training thread queues it
# (Client.switch): the end edge of ``end`` and the begin edge of ``begin``
# (either may be None) at one clock, in one tuple of these seven fields,
# which the sender makes into its one or two Edges (switch_edges).
SWITCH_FIELDS = 7


def switch_edges(item):
    """The Edges of a queued switch (SWITCH_FIELDS fields): the end, then the begin."""
    t, end, begin, step, micro, extra, model = item
    out = []
    if end is not None:
        out.append(make_edge((t, end, step, micro, "end", False, None, extra, model)))
    if begin is not None:
        out.append(make_edge((t, begin, step, micro, "begin", False, None, extra, model)))
    return out


def edges_of(item):
    """The Edges of a queued tuple: a switch's one or two, or the one Edge
    whose fields it holds."""
    return switch_edges(item) if len(item) == SWITCH_FIELDS else [make_edge(item)]


def count(item):
    """The messages a queued item stands for (its fields, a message dict or
    an encoded line): a switch's edges, a line's lines, else one."""
    if type(item) is bytes:
        return item.count(b"\n")
    if type(item) is tuple and len(item) == SWITCH_FIELDS:
        return (item[1] is not None) + (item[2] is not None)
    return 1


def phase_messages(numbered):
    """The ``phase`` messages of a numbered queued tuple, ``(seq, fields)``:
    one edge's, or a switch's two (seq, then seq + 1)."""
    seq, fields = numbered
    if len(fields) != SWITCH_FIELDS:
        return [phase_message(numbered)]
    return [phase_message((seq + i, edge)) for i, edge in enumerate(switch_edges(fields))]


def phase_message(numbered):
    """Make the ``phase`` message of one numbered edge, ``(seq, Edge)``
    (on the sender thread)."""
    seq, (t, name, step, micro, edge, user, raw, extra, model) = numbered
    msg = {"v": 1, "type": "phase", "seq": seq, "t": t, "name": name, "step": step,
           "micro": micro, "edge": edge, "user": user, "mem": mem_of(raw)}
    if extra:
        msg.update(extra)
    if model is not None and not user:  # a user phase belongs to no watch
        msg["model"] = model
    return msg


def _made_late(o):
    """json's ``default``: a value made on the sender as it encodes (an
    anatomy's ``saved``, ``_modules.Split``) encodes as what it makes."""
    make = getattr(o, "json_value", None)
    if make is None:
        raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)
    return make()


_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False,
                            default=_made_late)
_quote = encode_basestring  # the C version when _json is built; no ASCII escaping


_mem_templates = {}  # key tuple -> "%d" template; mem has one or two shapes


def _mem_text(mem):
    """Return ``mem`` as JSON text, or None when it is not a dict of str -> int."""
    if mem is None:
        return "null"
    if type(mem) is not dict:
        return None
    values = tuple(mem.values())
    for value in values:
        if type(value) is not int:
            return None
    keys = tuple(mem)
    template = _mem_templates.get(keys)
    if template is None:
        if not all(type(k) is str for k in keys):
            return None
        template = "{%s}" % ",".join(_quote(k).replace("%", "%%") + ":%d" for k in keys)
        if len(_mem_templates) < 16:
            _mem_templates[keys] = template
    return template % values


# mem's text when all six values are there (_cuda.MEM_KEYS order)
_VALUES_TEXT = "{%s}" % ",".join('"%s":%%d' % field for field, _ in MEM_KEYS)


def _values_text(raw):
    """``_mem_text(mem_from_raw(raw))`` for a read's six values
    (_cuda.compact) when each is an int of at least 0, as a read of a
    working allocator gives them; None otherwise (the general path)."""
    a, b, c, d, e, f = raw
    if type(a) is int and type(b) is int and type(c) is int and type(d) is int \
            and type(e) is int and type(f) is int and min(raw) >= 0:
        return _VALUES_TEXT % raw
    return None


def _finite_float(x):
    return type(x) is float and x - x == 0.0  # NaN and infinities fail


_PHASE_KEYS = ("v", "type", "seq", "t", "name", "step", "micro", "edge", "user", "mem")
_SAMPLE_KEYS = ("v", "type", "seq", "t", "mem")
_MARK_KEYS = ("v", "type", "seq", "t", "name", "step", "mem")


def _fast(msg):
    """Encode the hot message kinds (phase, sample, mark) without json.dumps.

    json.dumps builds an encoder per call, which costs several microseconds
    of the sender's time (and so of the GIL the training thread needs) per
    message. This formats the exact fields our builders make; any other shape
    returns None and goes through the generic encoder, so the output is always
    what json.dumps would produce, up to key order.
    """
    kind = msg.get("type")
    if kind == "phase":
        keys = _PHASE_KEYS
    elif kind == "sample":
        keys = _SAMPLE_KEYS
    elif kind == "mark":
        keys = _MARK_KEYS
    else:
        return None
    size = msg.get("input") if kind == "phase" else None
    model = msg.get("model") if kind == "phase" else None
    if len(msg) != len(keys) + (1 if size is not None else 0) + (1 if model is not None else 0) \
            or msg.get("v") != 1 \
            or type(msg.get("seq")) is not int:
        return None
    t = msg.get("t")
    mem = _mem_text(msg.get("mem", 0))
    if not _finite_float(t) or mem is None:
        return None
    if kind == "sample":
        return '{"v":1,"type":"sample","seq":%d,"t":%r,"mem":%s}\n' % (msg["seq"], t, mem)
    name, step = msg.get("name"), msg.get("step")
    if type(name) is not str or type(step) is not int:
        return None
    if kind == "mark":
        return '{"v":1,"type":"mark","seq":%d,"t":%r,"name":%s,"step":%d,"mem":%s}\n' % (
            msg["seq"], t, _quote(name), step, mem)
    micro, edge, user = msg.get("micro"), msg.get("edge"), msg.get("user")
    if type(micro) is not int or type(edge) is not str or type(user) is not bool:
        return None
    extra = ""
    if size is not None:
        extra = _input_text(size)
        if extra is None:
            return None
    if model is not None:
        if type(model) is not str:
            return None
        extra += ',"model":' + _quote(model)
    return ('{"v":1,"type":"phase","seq":%d,"t":%r,"name":%s,"step":%d,"micro":%d,'
            '"edge":%s,"user":%s,"mem":%s%s}\n' % (
                msg["seq"], t, _quote(name), step, micro, _quote(edge),
                "true" if user else "false", mem, extra))


def _input_text(size):
    """Return ``,"input":{...}`` for a phase's input size, or None for another shape
    (protocol additions item 1: batch and tokens, each an int or null)."""
    if type(size) is not dict or tuple(size) != ("batch", "tokens"):
        return None
    batch, tokens = size["batch"], size["tokens"]
    for v in (batch, tokens):
        if v is not None and (type(v) is not int or v < 0):
            return None
    return ',"input":{"batch":%s,"tokens":%s}' % (
        "null" if batch is None else "%d" % batch, "null" if tokens is None else "%d" % tokens)


def encode_item(item):
    """Encode a numbered queue item: a message dict, or a ``(seq, fields)``
    pair (a switch's two lines in one bytes object). An edge's line is
    written from its fields (_edge_text) where its shape allows, else from
    the message phase_message makes."""
    if type(item) is dict:
        return encode(item)
    seq, f = item
    if len(f) == SWITCH_FIELDS:
        t, end, begin, step, micro, extra, model = f
        if type(t) is float and t - t == 0.0 and type(step) is int and type(micro) is int \
                and type(seq) is int:
            # The edges of a switch without a read, as a step at rest queues
            # them: a template of what stays from step to step (the names,
            # the model, the input size), kept for the usual ones.
            if extra is None:
                key = (end, begin, model)
                try:
                    shape = _switch_shapes.get(key)
                except TypeError:  # a field that is no key: not one to keep
                    shape = key = None
                if shape is None:
                    shape = _switch_shape(end, begin, "", model)
                    if shape is not None and key is not None and len(_switch_shapes) < 256:
                        _switch_shapes[key] = shape
            elif type(extra) is dict and len(extra) == 1 and "input" in extra:
                tail = _input_text(extra["input"])
                shape = None if tail is None else _switch_shape(end, begin, tail, model)
            else:
                shape = None
            if shape is not None:
                template, two = shape
                line = (template % ((seq, t, step, micro, seq + 1, t, step, micro) if two
                                    else (seq, t, step, micro))).encode("utf-8")
                if len(line) <= MAX_LINE:
                    return line
        texts = []
        if end is not None:
            texts.append(_edge_text(seq, t, end, step, micro, "end", False, None, extra, model))
            seq += 1
        if begin is not None:
            texts.append(_edge_text(seq, t, begin, step, micro, "begin", False, None, extra,
                                    model))
        lines = [text.encode("utf-8") for text in texts if text is not None]
        if len(lines) == len(texts) and all(len(line) <= MAX_LINE for line in lines):
            return b"".join(lines)
        return b"".join([encode(msg) for msg in phase_messages(item)])
    text = _edge_text(seq, *f)
    if text is not None:
        line = text.encode("utf-8")
        if len(line) <= MAX_LINE:
            return line
    return encode(phase_message(item))


_PHASE_LINE = ('{"v":1,"type":"phase","seq":%d,"t":%r,"name":%s,"step":%d,"micro":%d,'
               '"edge":"%s","user":%s,"mem":%s%s}\n')
# _PHASE_LINE with its name, edge, user, mem and extra fields to write in,
# its seq, t, step and micro left to format (_switch_shape)
_PHASE_SHAPE = _PHASE_LINE.replace("%d", "%%d").replace("%r", "%%r")
_switch_shapes = {}  # (end, begin, model) -> _switch_shape's answer


def _switch_shape(end, begin, tail, model):
    """The template of a switch's lines without a read (_edge_text's, the
    fields that stay from step to step written in) and whether it has two
    edges; its values: seq, t, step and micro, then, with two, the same for
    the second (seq + 1). ``tail``: an extra field's text. None for a shape
    _edge_text would not write so (a name or model that is no str)."""
    if model is not None:
        if type(model) is not str:
            return None
        tail += ',"model":' + _quote(model)
    lines = []
    for name, edge in ((end, "end"), (begin, "begin")):
        if name is None:
            continue
        if type(name) is not str:
            return None
        lines.append(_PHASE_SHAPE % (_quote(name).replace("%", "%%"), edge, "false", "null",
                                     tail.replace("%", "%%")))
    return ("".join(lines), len(lines) == 2) if lines else None


def _edge_text(seq, t, name, step, micro, edge, user, raw, extra, model):
    """The ``phase`` line of an edge's fields, as json.dumps writes the
    message phase_message makes of them (key order included), for the
    shapes the hook queues: an int seq, step and micro, a finite float
    clock, a str name and model, a read that _mem_text can write, and
    ``extra`` None or one of ``input``, ``span`` (with ``same_as``); None
    for anything else, which the generic encoder takes."""
    if type(seq) is not int or type(step) is not int or type(micro) is not int \
            or type(name) is not str or type(t) is not float or t - t != 0.0 \
            or (edge != "end" and edge != "begin") or type(user) is not bool:
        return None
    mem = _values_text(raw) if type(raw) is tuple and len(raw) == len(MEM_KEYS) else None
    if mem is None:
        mem = _mem_text(mem_of(raw))
        if mem is None:
            return None
    tail = ""
    if extra:
        if type(extra) is not dict:
            return None
        keys = tuple(extra)
        if keys == ("input",):
            tail = _input_text(extra["input"])
        elif keys == ("span",) and type(extra["span"]) is str:
            tail = ',"span":' + _quote(extra["span"])
        elif keys == ("span", "same_as") and type(extra["span"]) is str \
                and type(extra["same_as"]) is int:
            tail = ',"span":%s,"same_as":%d' % (_quote(extra["span"]), extra["same_as"])
        else:
            return None
        if tail is None:
            return None
    if model is not None and not user:
        if type(model) is not str:
            return None
        tail += ',"model":' + _quote(model)
    return _PHASE_LINE % (seq, t, _quote(name), step, micro, edge, "true" if user else "false",
                          mem, tail)


def encode(msg):
    """Return ``msg`` as one newline-terminated line, or raise ValueError.

    NaN/infinity and lines over 65,536 bytes are refused rather than sent.
    """
    text = _fast(msg)
    if text is None:
        text = _ENCODER.encode(msg) + "\n"
    line = text.encode("utf-8")
    if len(line) > MAX_LINE:
        raise ValueError("vramscope: %s message of %d bytes exceeds %d"
                         % (msg.get("type"), len(line), MAX_LINE))
    return line


def _size_or_none(v):
    """Return ``v`` as a non-negative int below 2^53, else None."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None
    return v if 0 <= v < 2 ** 53 else None


def build_oom(step, phase, mem, requested, device_free, device_total):
    """Return an ``oom`` message (seq is set by the client); bad figures become null."""
    return {
        "v": PROTOCOL, "type": "oom", "seq": None, "t": time.monotonic(),
        "step": max(int(step), 0),
        "phase": clip(phase, MAX_NAME) if isinstance(phase, str) else None,
        "mem": mem,
        "requested": _size_or_none(requested),
        "device_free": _size_or_none(device_free),
        "device_total": _size_or_none(device_total),
    }
