"""wheelcheck.py must catch the broken wheels it is there to catch.

Each test takes a wheel ``make wheels`` built (``$WHEEL_DIR``, default
bin/dist) and breaks one thing the way a build could: a tag newer or older
than the binary, a binary of the wrong platform, a lost executable bit, a
library outside the manylinux set, a build without NVML. Run by
``make check-wheels`` after the wheels pass.
"""

import base64
import glob
import hashlib
import os
import re
import shutil
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "pyhook"))

import setup as pyhook_setup  # noqa: E402 - pyhook/setup.py's tag reader
import wheelcheck  # noqa: E402

DIST = os.environ.get("WHEEL_DIR", os.path.join(HERE, "..", "bin", "dist"))
VERSION = wheelcheck.release_version()


def built(platform):
    """The wheel whose tag matches ``platform``; ``manylinux_*`` means the cgo one, not 2_17's static one."""
    paths = glob.glob(os.path.join(DIST, "vramscope-%s-py3-none-%s.whl" % (VERSION, platform)))
    if platform.startswith("manylinux_*"):
        paths = [p for p in paths if "manylinux_2_17_" not in p]
    if len(paths) != 1:
        pytest.fail("want one %s wheel in %s, found %s: run make wheels first" % (platform, DIST, paths))
    return paths[0]


def rewrite(src, out_dir, tag=None, binary=None, mode=None):
    """Copy the wheel at ``src``, retagged, with another binary or file mode."""
    old_tag = re.search(r"py3-none-([a-z0-9_]+)\.whl$", src).group(1)
    tag = tag or old_tag
    dst = os.path.join(str(out_dir), "vramscope-%s-py3-none-%s.whl" % (VERSION, tag))
    dist_info = "vramscope-%s.dist-info/" % VERSION
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        blob = binary if binary is not None else (
            zin.read(wheelcheck.BINARY) if wheelcheck.BINARY in zin.namelist() else None)
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == dist_info + "WHEEL":
                data = data.replace(b"py3-none-" + old_tag.encode(), b"py3-none-" + tag.encode())
            elif info.filename == wheelcheck.BINARY:
                data = blob
                if mode is not None:
                    info.external_attr = mode << 16
            elif info.filename == dist_info + "RECORD" and blob is not None:
                digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
                data = re.sub(r"(?m)^%s,.*$" % re.escape(wheelcheck.BINARY),
                              "%s,sha256=%s,%d" % (wheelcheck.BINARY, digest, len(blob)),
                              data.decode()).encode()
            zout.writestr(info, data)
    return dst


def broken(path):
    with pytest.raises(wheelcheck.Broken) as e:
        wheelcheck.check_wheel(path, VERSION)
    return str(e.value)


def test_the_built_wheels_pass():
    for platform in ("manylinux_*_x86_64", "manylinux_*_aarch64", "manylinux_2_17_x86_64", "manylinux_2_17_aarch64",
                     "macosx_*_arm64", "macosx_*_x86_64", "any"):
        tag, needs = wheelcheck.check_wheel(built(platform), VERSION)
        assert needs.startswith("static") == platform.startswith("manylinux_2_17")


def test_a_static_binary_under_a_newer_glibc_tag_fails(tmp_path):
    path = rewrite(built("manylinux_2_17_x86_64"), tmp_path, tag="manylinux_2_34_x86_64")
    assert "a static binary runs on any glibc" in broken(path)


def test_a_tag_that_promises_an_older_glibc_fails(tmp_path):
    path = rewrite(built("manylinux_*_x86_64"), tmp_path, tag="manylinux_2_17_x86_64")
    assert "needs GLIBC_2." in broken(path) and "manylinux_2_17" in broken(path)


def test_a_tag_newer_than_the_binary_needs_fails(tmp_path):
    path = rewrite(built("manylinux_*_aarch64"), tmp_path, tag="manylinux_2_39_aarch64")
    assert "tag says manylinux_2_39" in broken(path)


def test_an_aarch64_binary_under_an_x86_64_tag_fails(tmp_path):
    src = built("manylinux_*_x86_64")
    with zipfile.ZipFile(built("manylinux_*_aarch64")) as z:
        arm = z.read(wheelcheck.BINARY)
    assert "binary is AArch64, tag says x86_64" in broken(rewrite(src, tmp_path, binary=arm))


def test_a_macos_binary_of_the_other_arch_fails(tmp_path):
    with zipfile.ZipFile(built("macosx_*_x86_64")) as z:
        intel = z.read(wheelcheck.BINARY)
    assert "tag says arm64" in broken(rewrite(built("macosx_*_arm64"), tmp_path, binary=intel))


def test_a_binary_without_its_executable_bit_fails(tmp_path):
    path = rewrite(built("manylinux_*_x86_64"), tmp_path, mode=0o644)
    assert "not executable" in broken(path)


def test_the_hook_only_wheel_with_a_binary_fails(tmp_path):
    src = built("any")
    dst = os.path.join(str(tmp_path), os.path.basename(src))
    shutil.copy(src, dst)
    with zipfile.ZipFile(dst, "a") as z:
        z.writestr(wheelcheck.BINARY, b"\x7fELF")
    assert "carries" in broken(dst)


def elf_wheel(tmp_path, exe):
    """A Linux wheel carrying the system's ``exe``, tagged as setup.py tags it."""
    with open(exe, "rb") as f:
        blob = f.read()
    tag = pyhook_setup.elf_tag(blob)
    return rewrite(built("manylinux_*_x86_64"), tmp_path, tag=tag, binary=blob)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="uses this machine's x86_64 executables")
def test_a_binary_without_nvml_fails(tmp_path):
    # coreutils' true links only libc: right tag, allowed libraries, no dlopen.
    assert "NVML is not opened at run time" in broken(elf_wheel(tmp_path, shutil.which("true")))


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="uses this machine's x86_64 executables")
def test_a_binary_linking_outside_the_manylinux_set_fails(tmp_path):
    # Python's own executable links libz/libexpat (Debian's) or libpython (a
    # shared build), none of which manylinux promises.
    msg = broken(elf_wheel(tmp_path, os.path.realpath(sys.executable)))
    assert re.match(r"links (libz|libexpat|libpython)\S*", msg) and msg.endswith("outside the manylinux set"), msg


def test_setup_and_readelf_agree_on_the_built_binaries():
    for platform in ("manylinux_*_x86_64", "manylinux_*_aarch64", "manylinux_2_17_x86_64", "manylinux_2_17_aarch64",
                     "macosx_*_arm64", "macosx_*_x86_64"):
        path = built(platform)
        with zipfile.ZipFile(path) as z:
            blob = z.read(wheelcheck.BINARY)
        tag = pyhook_setup.elf_tag(blob) if blob[:4] == b"\x7fELF" else pyhook_setup.macho_tag(blob)
        assert path.endswith("-py3-none-%s.whl" % tag)


def test_the_hook_only_message_names_the_built_tags():
    """_cli.py tells users which machines the platform wheels fit: it must say what was built."""
    sys.path.insert(0, os.path.join(HERE, "..", "pyhook", "vramscope"))
    import _cli  # the module alone: the package's __init__ is not needed for its text

    glibc = {re.search(r"manylinux_2_(\d+)_", built(p)).group(1) for p in ("manylinux_*_x86_64", "manylinux_*_aarch64")}
    macos = {re.search(r"macosx_(\d+)_0_", built(p)).group(1) for p in ("macosx_*_arm64", "macosx_*_x86_64")}
    assert len(glibc) == 1 and "glibc >= 2.%s" % glibc.pop() in _cli.HOW_TO_GET
    assert len(macos) == 1 and "macOS %s+" % macos.pop() in _cli.HOW_TO_GET
