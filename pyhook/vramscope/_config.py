"""Resolves the hook's configuration from arguments and environment variables.

Arguments win over the environment. A bad environment value is reported with
one warning and replaced by its default (a launcher may set variables for
every process, and that must not stop training); a bad explicit argument
raises ValueError at ``watch()`` time, before any hook is installed.
"""

import math
import os

from . import _safe

DEFAULT_SAMPLE_HZ = 50.0
DEFAULT_ACTIVATIONS_EVERY = 100
MAX_SAMPLE_HZ = 1000.0


def default_socket_path(environ=None):
    """Return the monitor's socket path, computed exactly as the Go side does.

    ``$VRAMSCOPE_SOCKET``, else ``$XDG_RUNTIME_DIR/vramscope/vramscope.sock``,
    else ``/tmp/vramscope-$UID/vramscope.sock``.
    """
    env = os.environ if environ is None else environ
    path = env.get("VRAMSCOPE_SOCKET")
    if path:
        return path
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "vramscope", "vramscope.sock")
    return "/tmp/vramscope-%d/vramscope.sock" % os.getuid()


class Config:
    """Config is the resolved hook configuration.

    Attributes:
        socket: path of the monitor's Unix socket.
        sample_hz: background sampling rate in Hz; 0 turns sampling off.
        reset_peaks: retired, always False: phase peaks are exact by default
            (docs/hook.md, "Exact peaks and your counters"); the argument and
            VRAMSCOPE_RESET_PEAKS are still accepted, with one warning.
        activations_every: measure saved activations every N steps (besides
            steps 0, 1 and 2); 0 turns activation accounting off.
        batch_size: the user's batch size, or None to read it from the input.
        disabled: VRAMSCOPE_DISABLE=1: install nothing, start no thread.
    """

    __slots__ = ("socket", "sample_hz", "reset_peaks", "activations_every",
                 "batch_size", "disabled")

    def __init__(self, socket, sample_hz, reset_peaks, activations_every,
                 batch_size, disabled):
        self.socket = socket
        self.sample_hz = sample_hz
        self.reset_peaks = reset_peaks
        self.activations_every = activations_every
        self.batch_size = batch_size
        self.disabled = disabled

    def __repr__(self):
        return "Config(%s)" % ", ".join(
            "%s=%r" % (k, getattr(self, k)) for k in self.__slots__)


def _env_warn(name, raw, default):
    _safe.warn("vramscope: %s=%r is not valid; using %r" % (name, raw, default), stacklevel=4)


def _env_float(env, name, default):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0 or value > MAX_SAMPLE_HZ:
        _env_warn(name, raw, default)
        return default
    return value


def _env_int(env, name, default):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        _env_warn(name, raw, default)
        return default
    return value


def _env_bool(env, name):
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    _env_warn(name, raw, False)
    return False


def resolve(socket=None, sample_hz=None, reset_peaks=None,
            activations_every=None, batch_size=None, environ=None):
    """Return the Config for these arguments, falling back to the environment."""
    env = os.environ if environ is None else environ
    if sample_hz is None:
        sample_hz = _env_float(env, "VRAMSCOPE_SAMPLE_HZ", DEFAULT_SAMPLE_HZ)
    else:
        try:
            sample_hz = float(sample_hz)
        except (TypeError, ValueError):
            raise ValueError("vramscope: sample_hz must be a number, got %r" % (sample_hz,))
        if not math.isfinite(sample_hz) or not 0 <= sample_hz <= MAX_SAMPLE_HZ:
            raise ValueError("vramscope: sample_hz must be between 0 and %g, got %r"
                             % (MAX_SAMPLE_HZ, sample_hz))
    if reset_peaks is not None or env.get("VRAMSCOPE_RESET_PEAKS", "").strip():
        _safe.warn("vramscope: reset_peaks is retired and ignored: phase peaks are exact "
                   "by default, and your own torch.cuda peak counters keep their meaning",
                   FutureWarning, stacklevel=3)
    if activations_every is None:
        activations_every = _env_int(env, "VRAMSCOPE_ACTIVATIONS_EVERY",
                                     DEFAULT_ACTIVATIONS_EVERY)
    elif isinstance(activations_every, bool) or not isinstance(activations_every, int) \
            or activations_every < 0:
        raise ValueError("vramscope: activations_every must be an int >= 0, got %r"
                         % (activations_every,))
    if batch_size is not None and (isinstance(batch_size, bool) or
                                   not isinstance(batch_size, int) or batch_size < 0):
        raise ValueError("vramscope: batch_size must be an int >= 0, got %r" % (batch_size,))
    if socket is None:
        socket = default_socket_path(env)
    return Config(
        socket=os.fspath(socket),
        sample_hz=sample_hz,
        reset_peaks=False,
        activations_every=activations_every,
        batch_size=batch_size,
        disabled=_env_bool(env, "VRAMSCOPE_DISABLE"),
    )
