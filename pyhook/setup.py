"""Build glue for the platform wheel (docs/install.md); the metadata is in pyproject.toml.

``make wheel`` copies this package to a staging directory and puts the
monitor binary at ``vramscope/_bin/vramscope``. When that file is there, the
wheel carries it, as ruff's and uv's wheels carry theirs, and is tagged for
the platform the binary runs on: ``py3-none-manylinux_2_N_<arch>``, N being
the newest glibc symbol version the binary asks for (a static binary: the
oldest manylinux, 2_17), the arch read from its ELF header. Without the
binary (``pip install ./pyhook``) the wheel stays pure Python, as before.
"""

import os
import re

from setuptools import Distribution, setup

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(HERE, "vramscope", "_bin", "vramscope")

# ELF e_machine values (System V gABI) for the architectures Go builds for.
ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64", 0x15: "ppc64le", 0x16: "s390x"}


def platform_tag(path):
    """Return the wheel platform tag the binary at ``path`` runs on."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise SystemExit("vramscope/_bin/vramscope is not a Linux (ELF) binary")
    order = "little" if data[5] == 1 else "big"
    machine = ELF_MACHINES.get(int.from_bytes(data[18:20], order))
    if machine is None:
        raise SystemExit("vramscope/_bin/vramscope: unknown ELF machine %#x"
                         % int.from_bytes(data[18:20], order))
    # The version names a dynamic binary needs sit in its .dynstr as
    # "GLIBC_2.N"; the newest one is the oldest glibc it runs on.
    minors = [int(m) for m in re.findall(rb"GLIBC_2\.(\d+)", data)]
    return "manylinux_2_%d_%s" % (max(minors + [17]), machine)


def platform_wheel():
    try:
        from setuptools.command.bdist_wheel import bdist_wheel as base
    except ImportError:  # setuptools < 70.1: the wheel package's
        from wheel.bdist_wheel import bdist_wheel as base

    tag = platform_tag(BINARY)

    class bdist_wheel(base):  # noqa: N801 - the command's name
        def get_tag(self):
            return "py3", "none", tag

    class BinaryDistribution(Distribution):
        """A distribution with a platform part: installed to platlib, not pure."""

        def has_ext_modules(self):
            return True

    return {"cmdclass": {"bdist_wheel": bdist_wheel}, "distclass": BinaryDistribution,
            "package_data": {"vramscope": ["_bin/vramscope"]}}


setup(**(platform_wheel() if os.path.isfile(BINARY) else {}))
