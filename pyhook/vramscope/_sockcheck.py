"""Checks the monitor's socket before the hook connects, and says once when
no monitor can be reached.

Safety: the hook sends argv, host, pid and the whole stream to whatever
listens at its path. Without ``XDG_RUNTIME_DIR`` that path is under the
shared ``/tmp``, where another local user could create
``vramscope-$UID/vramscope.sock`` first. So before each connection attempt
the hook checks that the socket's directory is a directory that belongs to
it with mode 0700 (no group or other access) and that the socket belongs to
it too, as the monitor's own ``Listen`` makes them. Otherwise it does not
connect, and warns once. Once connected, and before it sends
anything, it checks that the listener runs as its user (``SO_PEERCRED``),
as the monitor checks the hook.

Reachability: a hook that has never reached a monitor after
``UNREACHABLE_AFTER`` seconds warns once with where it is trying and how to
point both sides at the same socket (a path too long for a Unix socket, a
regular file at the path, and a monitor started in a shell with another
``XDG_RUNTIME_DIR`` all used to fail in silence).

Both run on the sender thread, never on the training thread, and never
raise.
"""

import errno
import os
import socket
import stat
import struct
import time
import warnings

UNREACHABLE_AFTER = 5.0  # seconds without a monitor before the hook says so
MAX_PATH = 107  # bytes: Linux's sun_path is 108, with the terminating NUL


def _mode(st):
    return "%04o" % stat.S_IMODE(st.st_mode)  # keeps the sticky bit: 1777, not 0777


def private_dir_advice(directory, base, uid):
    """What to do about a socket directory others can open: never change its
    mode (it may be /tmp, which every user needs open); make a private
    directory inside it, as the monitor's ``ipc.PrivateDirAdvice`` says."""
    private = os.path.join(directory, "vramscope-%d" % uid)
    sock = os.path.join(private, base)
    return ("leave %s as it is and use a private directory: mkdir -m 700 %s, then "
            "VRAMSCOPE_SOCKET=%s on the training side and --socket %s on the monitor"
            % (directory, private, sock, sock))


def unsafe(path):
    """Return why connecting to ``path`` would be unsafe, or None.

    A path where nothing exists yet is not unsafe (it is unreachable, which
    :class:`Reach` reports); a socket or directory that belongs to another
    user, or a directory that others may enter, is.
    """
    me = os.geteuid()
    directory = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(directory)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a directory" % directory
    if st.st_uid != me:
        return "the socket directory %s belongs to uid %d, not to you (uid %d)" % (
            directory, st.st_uid, me)
    if stat.S_IMODE(st.st_mode) & 0o077:
        return ("the socket directory %s has mode %s: others can open it, and the socket "
                "needs a directory only you can open; %s"
                % (directory, _mode(st), private_dir_advice(directory, os.path.basename(path), me)))
    try:
        sst = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISSOCK(sst.st_mode) and sst.st_uid != me:
        return "the socket %s belongs to uid %d, not to you (uid %d)" % (path, sst.st_uid, me)
    return None


def unreachable(path, exc, environ=None):
    """Return one line: why ``path`` cannot be reached and what to do."""
    env = os.environ if environ is None else environ
    same = ("point both sides at the same socket: start the monitor with "
            "`vramscope --socket %s`, or set VRAMSCOPE_SOCKET to one path in both shells" % path)
    size = len(os.fsencode(path))
    if size > MAX_PATH:
        return ("the path is %d bytes, longer than the %d a Unix socket allows; set "
                "VRAMSCOPE_SOCKET to a shorter path in both shells" % (size, MAX_PATH))
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISSOCK(st.st_mode):
        return ("%s is not a socket (a regular file or other); remove it or choose another "
                "path: %s" % (path, same))
    code = getattr(exc, "errno", None)
    if code == errno.ECONNREFUSED:
        return "a socket is there but no monitor listens on it (one that exited?); " + same
    if st is None:
        runtime = env.get("XDG_RUNTIME_DIR")
        where = ("XDG_RUNTIME_DIR is %s in this shell" % runtime if runtime
                 else "XDG_RUNTIME_DIR is unset in this shell")
        return ("nothing is there: no monitor runs, or it listens elsewhere (the default path "
                "follows XDG_RUNTIME_DIR, and %s); %s" % (where, same))
    return "%s; %s" % (exc, same)


# Where the warnings of the sender thread point: the user's line that
# started the watch (set by watch(); _api.user_frame), so Python prints
# "train.py:12: RuntimeWarning: vramscope: ..." and that line, as for any
# warning. Before a watch, or where no user frame was found, "vramscope"
# with no line.
origin = ("vramscope", 0)


def _warn(text):
    # The sender thread has no caller of the user's: the warning points at
    # origin, never at the hook's own source (its `if not
    # self._reach.allowed():` looked like a traceback).
    filename, lineno = origin
    try:
        warnings.warn_explicit("vramscope: " + text + "; training continues without monitoring",
                               RuntimeWarning, filename, lineno, module="vramscope")
    except Exception:  # noqa: BLE001 - a warnings filter set to "error" must not escape
        pass


class Reach:
    """Reach follows one client's attempts to reach its monitor.

    ``allowed()`` is asked before each attempt, ``failed(exc)`` or
    ``connected(sock)`` after it. Each of the two warnings is given at most once.
    """

    def __init__(self, path, after=None, clock=time.monotonic):
        self.path = path
        self.after = UNREACHABLE_AFTER if after is None else after
        self.clock = clock
        self.reached = False
        self.warned_unsafe = False
        self.warned_unreachable = False
        self._first_failure = None

    def allowed(self):
        """Return True when the hook may connect to the path now."""
        try:
            why = unsafe(self.path)
        except Exception:  # noqa: BLE001 - a check that fails must not stop the sender
            why = None
        if why is None:
            return True
        if not self.warned_unsafe:
            self.warned_unsafe = True
            _warn("not connecting to %s: %s" % (self.path, why))
        return False

    def failed(self, exc):
        """Count a failed attempt; warn once when no monitor was ever reached."""
        now = self.clock()
        if self._first_failure is None:
            self._first_failure = now
        if self.reached or self.warned_unreachable or now - self._first_failure < self.after:
            return
        self.warned_unreachable = True
        try:
            why = unreachable(self.path, exc)
        except Exception:  # noqa: BLE001
            why = str(exc)
        _warn("no monitor reached at %s after %.0f s: %s" % (
            self.path, now - self._first_failure, why))

    def connected(self, sock):
        """Check the listener at the other end of ``sock`` (Linux: its uid, by
        ``SO_PEERCRED``) and return True when it runs as this user; else warn
        once and return False, and the caller closes ``sock`` unused."""
        uid = peer_uid(sock)
        if uid is None or uid == os.geteuid():
            self.reached = True
            return True
        if not self.warned_unsafe:
            self.warned_unsafe = True
            _warn("not sending to %s: the monitor listening there runs as uid %d, not as you "
                  "(uid %d)" % (self.path, uid, os.geteuid()))
        return False


def peer_uid(sock):
    """Return the uid of the process at the other end of a Unix socket, or
    None where the system cannot tell (SO_PEERCRED is Linux's)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid
