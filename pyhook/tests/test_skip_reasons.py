"""`make test` says what it skipped and why, one line each: every pytest run
in the Makefile asks for the skip summary (-rs), and every skip in these
tests gives its reason."""

import ast
import os
import re

from conftest import ROOT

TESTS = os.path.dirname(os.path.abspath(__file__))


def test_every_pytest_run_in_the_makefile_lists_its_skips():
    with open(os.path.join(ROOT, "Makefile")) as f:
        runs = [line for line in f if re.search(r"-m pytest\b", line)]
    assert runs, "no pytest run in the Makefile"
    for line in runs:
        assert re.search(r"\s-r\w*s", line), "a pytest run without -rs: " + line.strip()


def _skips(tree):
    """Yield (line, has_reason) for each skip call or mark in a module."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name == "skip" and isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "pytest":
            yield node.lineno, bool(node.args) or any(k.arg in ("reason", "msg") for k in node.keywords)
        elif name in ("skip", "skipif") and isinstance(f, ast.Attribute) and getattr(f.value, "attr", "") == "mark":
            yield node.lineno, any(k.arg == "reason" for k in node.keywords) or (name == "skip" and bool(node.args))


def test_every_skip_says_why():
    missing = []
    for name in sorted(os.listdir(TESTS)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(TESTS, name)) as f:
            tree = ast.parse(f.read(), name)
        missing += ["%s:%d" % (name, line) for line, ok in _skips(tree) if not ok]
    assert not missing, "skips without a reason: " + ", ".join(missing)
