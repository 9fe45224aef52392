"""Builds protocol-v1 messages (docs/protocol.md) and encodes them as lines."""

import json
import os
import secrets
import socket as _socket
import sys
import time

VERSION = "0.1.0"
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
                argv=None):
    """Return the hello message (seq 0) for this process."""
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
            "reset_peaks": bool(config.reset_peaks),
            "activations_every": int(config.activations_every),
        },
    })
    return msg


def new_session_id():
    """Return a random session id (16 hex characters)."""
    return secrets.token_hex(8)


def encode(msg):
    """Return ``msg`` as one newline-terminated line, or raise ValueError.

    NaN/infinity and lines over 65,536 bytes are refused rather than sent.
    """
    line = json.dumps(msg, allow_nan=False, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8") + b"\n"
    if len(line) > MAX_LINE:
        raise ValueError("vramscope: %s message of %d bytes exceeds %d"
                         % (msg.get("type"), len(line), MAX_LINE))
    return line
