"""Keeps the hook's lasting descriptors apart from the process's own, and
tells whether a number is still the hook's.

A process may close every descriptor it did not open (``os.closerange(3,
4096)``, as daemonizing code and some launchers do), and its next files and
sockets get the same numbers, lowest first. Two things keep the hook from
writing into them:

* :func:`lift` moves each descriptor the hook keeps (its socket to the
  monitor, its /proc files) to a number far above the ones the process
  opens: half its soft limit on open files, 4096 at most. A process reaches
  such a number only once every number below it is open.
* :func:`identity` says what a number names (device, inode and file type):
  the hook compares it with what it opened before each write, send and
  close, and right before each send, never before a wait (a number checked,
  then waited on, may be the process's own file when the wait ends).

A check and the call after it are still two system calls: a thread of the
process that replaces that very number in between (``dup2`` onto it) is
not seen.
"""

import os
import stat

try:
    import fcntl as _fcntl
    import resource as _resource
except ImportError:  # not a Unix: the numbers stay where they were opened
    _fcntl = _resource = None

# The highest number lift() starts from: the kernel's table of descriptors
# grows to the highest one open (8 bytes a number).
MAX_FLOOR = 4096


def identity(fd):
    """What ``fd`` names: (st_dev, st_ino, file type), or None once closed."""
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode))


def floor():
    """The lowest number lift() moves a descriptor to: half the process's soft
    limit on open files, at most MAX_FLOOR; None where it cannot be read."""
    if _resource is None:
        return None
    try:
        soft = _resource.getrlimit(_resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return None
    if soft == _resource.RLIM_INFINITY or soft > 2 * MAX_FLOOR:
        return MAX_FLOOR
    return soft // 2 if soft >= 16 else None


def lift(fd):
    """Move ``fd``, which the hook has just opened, to the lowest free number
    at or above :func:`floor` (close-on-exec) and return that number; ``fd``
    itself where it is there already or cannot be moved."""
    low = floor()
    if low is None or fd >= low or _fcntl is None:
        return fd
    try:
        high = _fcntl.fcntl(fd, _fcntl.F_DUPFD_CLOEXEC, low)
    except (OSError, AttributeError, ValueError):
        return fd  # every number up there taken: where it was, checked as before
    os.close(fd)
    return high
