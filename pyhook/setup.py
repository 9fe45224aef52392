"""Build glue for the platform wheels (docs/install.md); the metadata is in pyproject.toml.

``make wheels`` copies this package to a staging directory and puts a
monitor binary at ``vramscope/_bin/vramscope``. When that file is there, the
wheel carries it, as ruff's and uv's wheels carry theirs, and is tagged for
the platform the binary runs on, read from the binary itself:

- Linux (ELF): ``py3-none-manylinux_2_N_<arch>``, N being the newest glibc
  symbol version the binary asks for (a static binary: the oldest
  manylinux, 2_17), the arch from the ELF header.
- macOS (Mach-O): ``py3-none-macosx_X_Y_<arch>``, X.Y being the oldest
  macOS the binary says it runs on (its LC_BUILD_VERSION), the arch from
  the Mach-O header.

Without the binary (``pip install ./pyhook``, or ``make wheels``' hook-only
wheel) the wheel stays pure Python: ``py3-none-any``.
``packaging/wheelcheck.py`` checks every tag against the binary again, with
binutils' readelf for ELF.
"""

import os
import re
import struct

from setuptools import Distribution, setup

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(HERE, "vramscope", "_bin", "vramscope")

# ELF e_machine values (System V gABI) for the architectures Go builds for.
ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64", 0x15: "ppc64le", 0x16: "s390x"}
# Mach-O cputype values (<mach/machine.h>): CPU_TYPE_X86_64, CPU_TYPE_ARM64.
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}
LC_BUILD_VERSION, LC_VERSION_MIN_MACOSX = 0x32, 0x24


def elf_tag(data):
    order = "little" if data[5] == 1 else "big"
    machine = ELF_MACHINES.get(int.from_bytes(data[18:20], order))
    if machine is None:
        raise SystemExit("vramscope/_bin/vramscope: unknown ELF machine %#x"
                         % int.from_bytes(data[18:20], order))
    # The version names a dynamic binary needs sit in its .dynstr as
    # "GLIBC_2.N"; the newest one is the oldest glibc it runs on.
    minors = [int(m) for m in re.findall(rb"GLIBC_2\.(\d+)", data)]
    return "manylinux_2_%d_%s" % (max(minors + [17]), machine)


def macho_tag(data):
    """The tag of a 64-bit little-endian Mach-O (what Go writes for macOS)."""
    cpu, ncmds = struct.unpack_from("<i", data, 4)[0], struct.unpack_from("<I", data, 16)[0]
    arch = MACHO_CPUS.get(cpu & 0xFFFFFFFF)
    if arch is None:
        raise SystemExit("vramscope/_bin/vramscope: unknown Mach-O cputype %#x" % cpu)
    off, minos = 32, None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd == LC_BUILD_VERSION:
            minos = struct.unpack_from("<I", data, off + 12)[0]  # after platform
        elif cmd == LC_VERSION_MIN_MACOSX and minos is None:
            minos = struct.unpack_from("<I", data, off + 8)[0]
        off += size
    if minos is None:
        raise SystemExit("vramscope/_bin/vramscope: Mach-O without a minimum macOS version")
    major, minor = minos >> 16, (minos >> 8) & 0xFF
    # From macOS 11 on, pip matches only X_0 tags.
    return "macosx_%d_%d_%s" % (major, 0 if major >= 11 else minor, arch)


def platform_tag(path):
    """Return the wheel platform tag the binary at ``path`` runs on."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == b"\x7fELF":
        return elf_tag(data)
    if data[:4] == b"\xcf\xfa\xed\xfe":  # MH_MAGIC_64, little-endian
        return macho_tag(data)
    raise SystemExit("vramscope/_bin/vramscope is neither an ELF nor a 64-bit Mach-O binary")


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


if __name__ == "__main__":  # setuptools runs this file as __main__; packaging/ imports it
    setup(**(platform_wheel() if os.path.isfile(BINARY) else {}))
