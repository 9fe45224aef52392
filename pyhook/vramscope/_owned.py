"""Tells whether a descriptor the hook opened is still its own.

A process may close every descriptor it did not open (``os.closerange(3,
4096)``, as daemonizing code and some launchers do), and its next files and
sockets get the same numbers. Before writing, the hook compares what the
number names now with what it opened: device, inode and file type.
"""

import os
import stat


def identity(fd):
    """What ``fd`` names: (st_dev, st_ino, file type), or None once closed."""
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode))
