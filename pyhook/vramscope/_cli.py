"""The ``vramscope`` command a pip install puts on PATH (docs/install.md).

The platform wheel carries the monitor, a Go binary, as ``vramscope/_bin/
vramscope``; this entry point replaces itself with it (``os.execv``), the
way ruff and uv ship theirs. The pure-Python package (``pip install
./pyhook``, or the hook-only ``py3-none-any`` wheel pip picks where no
platform wheel fits) has no binary: then a ``vramscope`` found further on
PATH is used, and without one the command says how to get it.
"""

import os
import sys

HOW_TO_GET = """\
vramscope: this Python package is the training hook only; it carries no monitor binary,
and no vramscope monitor is on PATH. pip installs this hook-only wheel where no platform
wheel fits: those are for Linux x86_64/aarch64 with glibc (NVML included from glibc >= 2.34)
and for macOS 12+ on arm64/x86_64.
Get the monitor one of these ways (docs/install.md):
  - on a machine the platform wheels fit, with pip >= 20.3 (older pip skips their tags):
    pip install --upgrade pip && pip install --force-reinstall vramscope
  - build it from a checkout (Go >= 1.24; gcc for NVML):  go install .   or   make build,
    then put it on PATH; this command runs it from there
The hook itself works as it is: import vramscope; vramscope.watch(model, optimizer)
"""


def bundled():
    """Return the path of the monitor binary inside this package, or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "vramscope")
    return path if os.path.isfile(path) else None


def _is_script(path):
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def on_path(argv0=None):
    """Return a monitor binary on PATH that is not this entry point, or None."""
    me = os.path.realpath(argv0 or sys.argv[0])
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cand = os.path.join(d or os.curdir, "vramscope")
        if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
            continue
        if os.path.realpath(cand) == me or _is_script(cand):
            continue  # this entry point, or another Python one
        return cand
    return None


def main(argv=None):
    """Run the monitor with ``argv`` (default: this command's arguments)."""
    args = sys.argv[1:] if argv is None else list(argv)
    binary = bundled() or on_path()
    if binary is None:
        sys.stderr.write(HOW_TO_GET)
        return 2
    if not os.access(binary, os.X_OK):
        sys.stderr.write("vramscope: %s is not executable; reinstall the wheel (pip keeps the "
                         "executable bit) or chmod +x it\n" % binary)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [binary] + args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
