#!/usr/bin/env python3
"""Checks the wheels ``make wheels`` built, as auditwheel would and more.

For every wheel in the folder given (docs/install.md, "The wheels"):

- its name, version and tags agree with each other, with the WHEEL and
  METADATA files inside and with ``pyhook/vramscope/_version.py``;
- the hook-only ``py3-none-any`` wheel carries no binary and is pure;
- a platform wheel carries ``vramscope/_bin/vramscope``, executable, listed
  in RECORD with its sha256, and the binary fits the tag:
  - Linux: binutils' ``readelf`` (not the parser setup.py tags with) says
    its machine is the tag's arch; a static binary (cgo off, no NVML: the
    fallback for older glibc) is tagged manylinux_2_17; else the newest ``GLIBC_2.N`` version it needs
    is the tag's ``manylinux_2_N``; it links (DT_NEEDED) only libraries every
    manylinux system has (libc, libpthread, libdl, libm, librt, libgcc_s,
    the dynamic loader); it does not link libnvidia-ml but imports
    ``dlopen`` and names ``libnvidia-ml.so.1``: go-nvml opens NVML at run
    time, so the wheel runs where no driver is installed;
  - macOS: the Mach-O header's CPU is the tag's arch, its LC_BUILD_VERSION
    minimum macOS is the tag's, and it loads only system libraries from
    /usr/lib and /System/Library.

``--expect`` names the set of wheels that must be there, so a wheel that
silently failed to build fails the check. Prints one line per wheel: file,
size, tag, and what its binary needs. Exits 1 on the first broken wheel.

``--picks DIR`` then asks pip itself which wheel it installs on each kind
of machine in MACHINES (``pip install --platform ... --target DIR/<name>``,
offline from the folder), and checks it is the one that machine should
get: a wheel with a tag pip does not understand is never picked.
"""

import argparse
import base64
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION_PY = os.path.join(HERE, "..", "pyhook", "vramscope", "_version.py")

ALLOWED_ELF = re.compile(r"^(libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|libm\.so\.6|librt\.so\.1|"
                         r"libgcc_s\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12])$")
ALLOWED_MACHO = ("/usr/lib/", "/System/Library/Frameworks/")
READELF_MACHINE = {"Advanced Micro Devices X86-64": "x86_64", "AArch64": "aarch64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}
BINARY = "vramscope/_bin/vramscope"


class Broken(Exception):
    pass


def release_version():
    with open(VERSION_PY) as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    return m.group(1)


def readelf(path, *flags):
    try:
        return subprocess.run(["readelf", "-W"] + list(flags) + [path], check=True,
                              capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise Broken("readelf not found (apt-get install binutils)")


def check_elf(path, tag):
    """Check a Linux binary against its manylinux tag; return what it needs."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(x86_64|aarch64)", tag)
    if not m:
        raise Broken("an ELF binary under the tag %s" % tag)
    want_glibc, want_arch = int(m.group(1)), m.group(2)
    header = readelf(path, "-h")
    machine = re.search(r"Machine:\s+(.+)", header).group(1).strip()
    if READELF_MACHINE.get(machine) != want_arch:
        raise Broken("binary is %s, tag says %s" % (machine, want_arch))
    dynamic = readelf(path, "-d")
    if "There is no dynamic section" in dynamic:
        # The fallback for glibc < 2.34: a static Go build, cgo off, no NVML.
        if want_glibc != 17:
            raise Broken("a static binary runs on any glibc: tag it manylinux_2_17, not %s" % tag)
        return "static; no NVML (cgo off), for glibc < 2.34"
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    bad = [lib for lib in needed if not ALLOWED_ELF.match(lib)]
    if bad:
        raise Broken("links %s, outside the manylinux set" % ", ".join(bad))
    versions = readelf(path, "-V")
    glibc = [tuple(map(int, v.split("."))) for v in re.findall(r"Name: GLIBC_(\d+(?:\.\d+)+)", versions)]
    newest = max(glibc, default=(2, 17))
    if newest[:2] != (2, want_glibc):
        raise Broken("needs GLIBC_%s, tag says manylinux_2_%d" % (".".join(map(str, newest)), want_glibc))
    others = set(re.findall(r"Name: ([A-Z]+[A-Z_]*)_\d", versions)) - {"GLIBC"}
    if others:
        raise Broken("needs symbol versions of %s" % ", ".join(sorted(others)))
    syms = readelf(path, "--dyn-syms")
    undefined = set(re.findall(r"\sUND\s+(\w+)", syms))
    with open(path, "rb") as f:
        names_nvml = b"libnvidia-ml.so.1" in f.read()
    if not ("dlopen" in undefined and names_nvml):
        raise Broken("NVML is not opened at run time (no dlopen import or no libnvidia-ml.so.1 name): "
                     "was it built without cgo?")
    return "needs %s; GLIBC_%s; NVML by dlopen" % (" ".join(needed), ".".join(map(str, newest)))


def check_macho(path, tag):
    """Check a macOS binary against its macosx tag; return what it loads."""
    m = re.fullmatch(r"macosx_(\d+)_(\d+)_(x86_64|arm64)", tag)
    if not m:
        raise Broken("a Mach-O binary under the tag %s" % tag)
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    magic, cpu, _, filetype, ncmds = struct.unpack_from("<IIIII", data, 0)
    if magic != 0xFEEDFACF or filetype != 2:  # MH_MAGIC_64, MH_EXECUTE
        raise Broken("not a 64-bit Mach-O executable (magic %#x, filetype %d)" % (magic, filetype))
    if MACHO_CPUS.get(cpu) != m.group(3):
        raise Broken("Mach-O cputype %#x, tag says %s" % (cpu, m.group(3)))
    off, minos, dylibs = 32, None, []
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd == 0x32:  # LC_BUILD_VERSION: platform, minos, sdk, ntools
            platform, minos = struct.unpack_from("<II", data, off + 8)
            if platform != 1:  # PLATFORM_MACOS
                raise Broken("LC_BUILD_VERSION platform %d, not macOS" % platform)
        elif cmd in (0xC, 0x80000018):  # LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB
            name_off = struct.unpack_from("<I", data, off + 8)[0]
            dylibs.append(data[off + name_off:off + size].split(b"\0")[0].decode())
        off += size
    if minos is None:
        raise Broken("no LC_BUILD_VERSION")
    if (minos >> 16, (minos >> 8) & 0xFF) != (int(m.group(1)), int(m.group(2))):
        raise Broken("minimum macOS %d.%d, tag says %s.%s" % (minos >> 16, (minos >> 8) & 0xFF,
                                                               m.group(1), m.group(2)))
    bad = [d for d in dylibs if not d.startswith(ALLOWED_MACHO)]
    if bad:
        raise Broken("loads %s, not a system library" % ", ".join(bad))
    return "macOS >= %d.%d; loads %s" % (minos >> 16, (minos >> 8) & 0xFF,
                                         " ".join(os.path.basename(d) for d in dylibs))


def check_wheel(path, version):
    """Check one wheel; return (its platform tag, what its binary needs)."""
    name = os.path.basename(path)
    m = re.fullmatch(r"vramscope-([^-]+)-py3-none-([a-z0-9_]+)\.whl", name)
    if not m:
        raise Broken("not named vramscope-<version>-py3-none-<platform>.whl")
    if m.group(1) != version:
        raise Broken("version %s, _version.py says %s" % (m.group(1), version))
    tag = m.group(2)
    with zipfile.ZipFile(path) as z:
        dist_info = "vramscope-%s.dist-info/" % version
        wheel_meta = z.read(dist_info + "WHEEL").decode()
        if re.findall(r"^Tag: (.+)$", wheel_meta, re.M) != ["py3-none-" + tag]:
            raise Broken("WHEEL's Tag lines disagree with the file name: %r" % wheel_meta)
        pure = tag == "any"
        if ("Root-Is-Purelib: %s" % ("true" if pure else "false")) not in wheel_meta:
            raise Broken("Root-Is-Purelib is wrong for a %s wheel" % ("pure" if pure else "platform"))
        meta = z.read(dist_info + "METADATA").decode()
        if "\nVersion: %s\n" % version not in meta:
            raise Broken("METADATA's Version is not %s" % version)
        names = z.namelist()
        if "vramscope/__init__.py" not in names or "vramscope/_version.py" not in names:
            raise Broken("the hook package is missing")
        binaries = [n for n in names if n.startswith("vramscope/_bin/")]
        if pure:
            if binaries:
                raise Broken("the hook-only wheel carries %s" % binaries)
            return tag, "hook only: finds a monitor on PATH"
        if binaries != [BINARY]:
            raise Broken("carries %s, want exactly %s" % (binaries, BINARY))
        info = z.getinfo(BINARY)
        if (info.external_attr >> 16) & 0o111 != 0o111:
            raise Broken("%s is not executable in the zip (mode %o)" % (BINARY, info.external_attr >> 16))
        blob = z.read(BINARY)
        digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
        record = z.read(dist_info + "RECORD").decode()
        if "%s,sha256=%s,%d" % (BINARY, digest, len(blob)) not in record:
            raise Broken("RECORD does not list the binary's hash and size")
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "vramscope")
        with open(binary, "wb") as f:
            f.write(blob)
        if tag.startswith("manylinux_"):
            return tag, check_elf(binary, tag)
        if tag.startswith("macosx_"):
            return tag, check_macho(binary, tag)
    raise Broken("unknown platform tag %s" % tag)


def manylinux(glibc_minor, arch):
    return ["manylinux_2_%d_%s" % (n, arch) for n in range(glibc_minor, 16, -1)]


def macos(major, arch):
    return ["macosx_%d_0_%s" % (n, arch) for n in range(major, 10, -1)] + \
        ["macosx_10_%d_%s" % (n, arch) for n in range(16, 8, -1) if arch == "x86_64"]


# The machines people train on, with the platform tags pip accepts there
# (what packaging.tags lists on that machine, newest first), and the wheel
# each one must get.
MACHINES = [
    ("ubuntu-22.04-x86_64", manylinux(35, "x86_64"), "linux-x86_64"),  # glibc 2.35
    ("rhel-9-x86_64", manylinux(34, "x86_64"), "linux-x86_64"),  # glibc 2.34
    ("gh200-ubuntu-24.04-aarch64", manylinux(39, "aarch64"), "linux-aarch64"),  # glibc 2.39
    ("macos-14-arm64", macos(14, "arm64"), "macos-arm64"),
    ("macos-13-x86_64", macos(13, "x86_64"), "macos-x86_64"),
    # Older glibc than the cgo builds need: the static builds, no NVML.
    ("ubuntu-20.04-x86_64", manylinux(31, "x86_64"), "linux-x86_64-static"),  # glibc 2.31
    ("rhel-8-aarch64", manylinux(28, "aarch64"), "linux-aarch64-static"),  # glibc 2.28
    # No binary built for it: the hook alone.
    ("alpine-musl-x86_64", ["musllinux_1_2_x86_64"], "any"),
    ("windows-x86_64", ["win_amd64"], "any"),
]


def check_picks(dist, workdir, version):
    """Install with pip for each of MACHINES; return {machine: target dir}."""
    targets = {}
    for name, platforms, want in MACHINES:
        target = os.path.join(workdir, name)
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", dist,
               "--only-binary=:all:", "--python-version", "3.10", "--implementation", "cp",
               "--target", target, "vramscope==" + version]
        for p in platforms:
            cmd += ["--platform", p]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise Broken("pip on %s: %s" % (name, proc.stderr.strip()))
        with open(os.path.join(target, "vramscope-%s.dist-info" % version, "WHEEL")) as f:
            tag = re.search(r"^Tag: py3-none-(.+)$", f.read(), re.M).group(1)
        binary = os.path.join(target, BINARY)
        got = platform_key(tag, binary if want != "any" else None)
        if got != want:
            raise Broken("pip on %s picked the %s wheel, want %s" % (name, tag, want))
        if want != "any" and not os.access(binary, os.X_OK):
            raise Broken("pip on %s installed no executable %s" % (name, BINARY))
        print("pip on %-28s installs py3-none-%s (%s)" % (name, tag, got))
        targets[name] = target
    return targets


def check_auditwheel(dist, auditwheel):
    """PyPA's auditwheel agrees: each manylinux tag is one its policy allows."""
    for name in sorted(os.listdir(dist)):
        m = re.search(r"-py3-none-manylinux_2_(\d+)_(\w+)\.whl$", name)
        if not m:
            continue
        out = subprocess.run([auditwheel, "show", os.path.join(dist, name)], capture_output=True, text=True)
        got = re.search(r"consistent\s+with\s+the\s+following\s+platform\s+tag:\s+\"manylinux_2_(\d+)_(\w+)\"",
                        out.stdout)
        if out.returncode != 0 or not got:
            raise Broken("auditwheel show %s: %s%s" % (name, out.stdout, out.stderr))
        if got.group(2) != m.group(2) or int(got.group(1)) > int(m.group(1)):
            raise Broken("%s: auditwheel says manylinux_2_%s_%s at best" % (name, got.group(1), got.group(2)))
        print("auditwheel: %-52s fits manylinux_2_%s_%s" % (name, got.group(1), got.group(2)))


def platform_key(tag, binary=None):
    """"linux-x86_64", "linux-x86_64-static" (a static binary), "macos-arm64", "any"."""
    if tag == "any":
        return "any"
    m = re.fullmatch(r"(manylinux|macosx)_\d+_\d+_(\w+)", tag)
    if not m:
        return tag
    key = "%s-%s" % ({"manylinux": "linux", "macosx": "macos"}[m.group(1)], m.group(2))
    if binary and m.group(1) == "manylinux" and "There is no dynamic section" in readelf(binary, "-d"):
        key += "-static"
    return key


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dist", help="folder of wheels")
    ap.add_argument("--auditwheel", metavar="PATH", help="then run this auditwheel on the manylinux wheels")
    ap.add_argument("--picks", metavar="DIR", help="then check which wheel pip installs on each machine")
    ap.add_argument("--expect", default="", help="comma-separated platforms that must be there: "
                    "linux-x86_64, linux-aarch64, linux-x86_64-static, linux-aarch64-static, macos-arm64, "
                    "macos-x86_64, any")
    args = ap.parse_args(argv)
    version = release_version()
    wheels = sorted(os.path.join(args.dist, n) for n in os.listdir(args.dist) if n.endswith(".whl"))
    seen = []
    for path in wheels:
        try:
            tag, needs = check_wheel(path, version)
        except (Broken, KeyError, zipfile.BadZipFile, struct.error, subprocess.CalledProcessError) as e:
            print("wheelcheck: %s: %s" % (os.path.basename(path), e), file=sys.stderr)
            return 1
        seen.append(platform_key(tag) + ("-static" if needs.startswith("static") else ""))
        print("%-48s %6.1f MiB  %-28s %s" % (os.path.basename(path), os.path.getsize(path) / 2**20, tag, needs))
    want = sorted(p for p in args.expect.split(",") if p)
    if want and sorted(seen) != want:
        print("wheelcheck: wheels for %s, want exactly %s" % (sorted(seen), want), file=sys.stderr)
        return 1
    print("wheelcheck: %d wheels passed" % len(seen))
    if args.picks or args.auditwheel:
        try:
            if args.auditwheel:
                check_auditwheel(args.dist, args.auditwheel)
            if args.picks:
                check_picks(args.dist, args.picks, version)
        except Broken as e:
            print("wheelcheck: %s" % e, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
