"""The every-step hooks carry copies of a few Watcher methods' bodies, a
frame less each (docs/hook.md, "Cost"). Each copy is headed by a line
``# copy of NAME(ARGS)``; this checks, on the source's syntax trees, that the
statements that follow are the body of ``Watcher.NAME`` with ARGS put in for
its parameters, so a change to an original that its copies miss fails here.
"""

import ast
import inspect
import os
import re

import pytest

from vramscope import _watch

PKG = os.path.dirname(os.path.abspath(_watch.__file__))
MODULES = ("_watch.py", "_forward_phase.py", "_zero_phase.py", "_steps.py",
           "_backward_phase.py", "_training_step.py", "_census_trigger.py", "_successor.py")
COPY = re.compile(r"^\s*# copy of (\w+)\((.*)\)\s*$")


def original(name):
    """The body (docstring left out) and parameter names of Watcher.NAME."""
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(getattr(_watch.Watcher, name))))
    fn = tree.body[0]
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body, [a.arg for a in fn.args.args[1:]]


class _PutIn(ast.NodeTransformer):
    def __init__(self, values):
        self.values = values

    def visit_Name(self, node):
        return self.values.get(node.id, node)


def with_arguments(name, args_text):
    body, params = original(name)
    args = ast.parse("f(%s)" % args_text, mode="eval").body.args
    assert len(args) == len(params), "copy of %s(%s): %d arguments for %s" % (
        name, args_text, len(args), params)
    values = dict(zip(params, args))
    return [ast.dump(_PutIn(values).visit(ast.parse(ast.unparse(stmt)).body[0]))
            for stmt in body], len(body)


def statements_from(tree, line):
    """The statement that begins on ``line`` and the ones after it in its block."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if isinstance(stmt, ast.stmt) and stmt.lineno == line:
                    return block[i:]
    return []


def copies():
    out = []
    for module in MODULES:
        with open(os.path.join(PKG, module)) as f:
            source = f.read()
        tree = ast.parse(source)
        for n, text in enumerate(source.splitlines(), 1):
            m = COPY.match(text)
            if m:
                out.append((module, n, m.group(1), m.group(2), tree))
    return out


def test_the_hot_paths_carry_the_copies_this_test_checks():
    found = sorted({(c[2], c[0]) for c in copies()})
    assert ("_activity", "_backward_phase.py") in found
    assert ("_activity", "_steps.py") in found
    assert ("_activity", "_forward_phase.py") in found
    assert ("_recover", "_zero_phase.py") in found
    assert ("_open_first", "_steps.py") in found
    assert ("_switch", "_backward_phase.py") in found
    assert len(copies()) >= 12


@pytest.mark.parametrize("module,line,name,args,tree",
                         copies(), ids=lambda v: v if isinstance(v, (str, int)) else "")
def test_each_copy_is_its_originals_body_with_the_arguments_put_in(module, line, name, args,
                                                                   tree):
    want, n = with_arguments(name, args)
    got = [ast.dump(ast.parse(ast.unparse(stmt)).body[0])
           for stmt in statements_from(tree, line + 1)[:n]]
    assert got == want, "%s:%d differs from %s(%s)" % (module, line, name, args)


def test_a_copy_that_differs_from_its_original_is_found():
    # The check itself: one changed statement is a mismatch.
    want, n = with_arguments("_switch", '"forward", "loss", reads')
    tree = ast.parse('self._open = "loss"\nself._client.switch("forward", "loss", True)')
    got = [ast.dump(stmt) for stmt in tree.body[:n]]
    assert got != want
    tree = ast.parse('self._open = "loss"\nself._client.switch("forward", "loss", reads)')
    assert [ast.dump(stmt) for stmt in tree.body[:n]] == want


def _self_attributes(tree, ctx):
    return {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "self" and isinstance(n.ctx, ctx)}


def test_every_state_the_mixins_use_is_declared_on_the_watcher():
    # Watcher's methods live in the mixins' files; its state is declared in
    # Watcher.__init__ or as a class attribute of the Watcher or a mixin.
    # A name the mixins read that neither declares (a typo, a renamed
    # attribute) would only fail on the path that reads it.
    with open(os.path.join(PKG, "_watch.py")) as f:
        watch = ast.parse(f.read())
    init = next(n for n in ast.walk(watch) if isinstance(n, ast.FunctionDef)
                and n.name == "__init__")
    declared = _self_attributes(init, ast.Store) | set(dir(_watch.Watcher))
    for module in MODULES[1:]:
        with open(os.path.join(PKG, module)) as f:
            used = _self_attributes(ast.parse(f.read()), ast.Load)
        assert used - declared == set(), module
