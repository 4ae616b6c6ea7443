"""What the one facts walk records in place of walks the checks used to make themselves: the
comprehensions of each loop body and scope body (in source order, outside lambdas and nested defs)
and facts.children (libcst's children without rebuilding the node). Each is compared with the walk
it replaced, over the fixture scripts and projects and the held-out training projects."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from archlint.code import dataflow as df
from archlint.code.facts import Facts, children

ROOT = Path(__file__).parents[2]
FILES = sorted((ROOT / "tests" / "fixtures" / "code").rglob("*.py")) + sorted(
    (ROOT / "benchmarks" / "eval_data" / "training_projects").rglob("*.py")
)

TRICKY = """
def f(xs, d):
    for x in [a for a in xs]:  # the header's comprehension is not in the body
        ys = [y for y in x]
        g = lambda: [z for z in ys]  # inside a lambda: left out
        def inner():
            return {k: v for k, v in d.items()}  # a nested def's own
        total = sum(v.item() for v in {k: w for k, w in d.items()}.values())
    else:
        e = [q for q in xs]  # the else clause is not the body either
    return [[i for i in row] for row in xs]


class C:
    attrs = [n for n in range(3)]

    def m(self, items=[i for i in range(2)]):  # a default is not the body
        return {i: j for i, j in items}
"""


def _walk_comprehensions(node):
    return list(df._comprehensions(node))


def _check(text: str) -> int:
    facts = Facts(cst.parse_module(text), text)
    checked = 0
    for loop in facts.loops:
        assert [id(c) for c in loop.comprehensions] == [id(c) for c in _walk_comprehensions(loop.node.body)]
        checked += 1
    for scope in facts.scopes:
        body = scope.node.body if scope.kind != "module" else scope.node
        assert [id(c) for c in scope.comprehensions] == [id(c) for c in _walk_comprehensions(body)]
        checked += 1
    return checked


def test_recorded_comprehensions_match_the_walk_on_tricky_code():
    assert _check(TRICKY) > 3
    facts = Facts(cst.parse_module(TRICKY), TRICKY)
    (loop,) = [lp for lp in facts.loops]
    assert [type(c).__name__ for c in loop.comprehensions] == ["ListComp", "GeneratorExp", "DictComp"]


@pytest.mark.parametrize("path", FILES[::7], ids=lambda p: p.name)
def test_recorded_comprehensions_match_the_walk(path):
    _check(path.read_text())


@pytest.mark.parametrize("path", FILES[::7], ids=lambda p: p.name)
def test_children_are_libcsts(path):
    class Compare(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            assert Counter(map(id, children(node))) == Counter(map(id, node.children)), type(node).__name__
            return True

    cst.parse_module(path.read_text()).visit(Compare())
