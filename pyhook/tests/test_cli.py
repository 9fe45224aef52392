"""The ``vramscope`` entry point a pip install puts on PATH (vramscope/_cli.py).

The source tree is the pure package (no ``_bin/vramscope``): the command
must find a monitor on PATH, skip Python entry points (itself included),
and without one say how to get the monitor. The platform wheel, which
carries the binary, is checked by ``make check-wheels`` in CI.
"""

import os
import subprocess
import sys

from conftest import ROOT

PYHOOK = os.path.join(ROOT, "pyhook")


def run_cli(path_dirs, *args):
    env = dict(os.environ, PYTHONPATH=PYHOOK, PATH=os.pathsep.join(path_dirs + ["/usr/bin", "/bin"]))
    return subprocess.run([sys.executable, "-m", "vramscope"] + list(args), env=env,
                          capture_output=True, text=True, timeout=60)


def entry_point_script(d):
    """A console script like the one pip writes for ``vramscope = vramscope._cli:main``."""
    path = os.path.join(d, "vramscope")
    with open(path, "w") as f:
        f.write("#!%s\nimport sys\nfrom vramscope._cli import main\nsys.exit(main())\n" % sys.executable)
    os.chmod(path, 0o755)
    return path


def test_pure_package_without_a_monitor_says_how_to_get_one(tmp_path):
    scripts = tmp_path / "venv-bin"
    scripts.mkdir()
    entry_point_script(str(scripts))
    proc = run_cli([str(scripts)], "version")
    assert proc.returncode == 2
    assert "carries no monitor binary" in proc.stderr
    assert "pip install --force-reinstall vramscope" in proc.stderr and "go install ." in proc.stderr
    # The entry point itself, run from PATH, does not exec itself in a loop.
    env = dict(os.environ, PYTHONPATH=PYHOOK, PATH=str(scripts) + ":/usr/bin:/bin")
    proc = subprocess.run([str(scripts / "vramscope"), "version"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "carries no monitor binary" in proc.stderr


def test_pure_package_uses_a_monitor_on_path(tmp_path, vs_bin):  # noqa: F811
    scripts, tools = tmp_path / "venv-bin", tmp_path / "tools"
    scripts.mkdir()
    tools.mkdir()
    entry_point_script(str(scripts))
    os.symlink(vs_bin, str(tools / "vramscope"))
    proc = run_cli([str(scripts), str(tools)], "version")
    assert proc.returncode == 0, proc.stderr
    assert "protocol: v1" in proc.stdout


def test_monitor_and_hook_carry_one_version(vs_bin):  # noqa: F811
    """The Go binary embeds vramscope/_version.py: both halves say the same release."""
    import vramscope

    out = subprocess.run([vs_bin, "version"], capture_output=True, text=True, timeout=60).stdout
    first = out.splitlines()[0]
    # "vramscope 0.1.0", or "vramscope 0.1.0+<commit>[.dirty]" when the build knew its commit.
    assert first == "vramscope " + vramscope.__version__ or \
        first.startswith("vramscope %s+" % vramscope.__version__), out
