"""walk.Walker calls a visitor's hooks as libcst's own `node.visit(visitor)` does, in the same order,
with the same nodes: checked with a visitor hooked on every node type and every field (outside the
whitespace and punctuation the walk does not enter), over the fixture scripts and projects and the
held-out training projects; and the facts walk built on it (facts.py) records what the libcst visit
recorded."""

from __future__ import annotations

import inspect
from pathlib import Path

import libcst as cst
import pytest

from archlint.code import facts as facts_module
from archlint.code import walk
from archlint.code.facts import Facts

ROOT = Path(__file__).parents[2]
FILES = sorted((ROOT / "tests" / "fixtures" / "code").rglob("*.py")) + sorted(
    (ROOT / "benchmarks" / "eval_data" / "training_projects").rglob("*.py")
)

SYNTAX = """
@decorator(arg)
@other
async def f(a, /, b: int = 1, *args, c=[x for x in y if x], **kw) -> "T":
    global g
    async with lock as (p, q), other:
        async for i in aiter():
            await g(f"{a!r:>{b}} {c=}", *args, **kw)
    try:
        x = yield from gen()
    except (A, B) as e:
        raise E from e
    else:
        del x[1:2, ::3]
    finally:
        return lambda q=1, *r: (q, r)
class C(Base, metaclass=M):
    x: int = 3
    def m(self): return {**d, 1: 2}, {1, *s}, [*l], not a or b and c < d <= e is not f in g
while True:
    if a: break
    elif b: continue
    else: pass
match v:
    case [1, *rest] | {"k": _} if rest: pass
    case Point(x=0) as p: pass
assert x, "msg"; import a.b as c; from . import (d, e as f); from .. import *
n = a if b else c; n += 1; n @= m; print(~x, -y, x ** 2 // 3 % 4 << 5 >> 6 & 7 | 8 ^ 9)
"""


def _recorder():
    """A CSTVisitor class with a hook on every node type (visit and leave) and every field."""
    events: list = []
    hooks: dict = {}
    kinds = [
        t
        for t in vars(cst).values()
        if isinstance(t, type)
        and issubclass(t, cst.CSTNode)
        and not inspect.isabstract(t)
        and t not in walk.LEAVES
        and hasattr(t, "_visit_and_replace_children")
    ]
    for t in kinds:
        name = t.__name__
        hooks[f"visit_{name}"] = lambda self, node, n=name: events.append(("visit", n, id(node)))
        hooks[f"leave_{name}"] = lambda self, node, n=name: events.append(("leave", n, id(node)))
        for field in t.__dataclass_fields__:
            hooks[f"visit_{name}_{field}"] = lambda self, node, n=name, f=field: events.append(("in", n, f, id(node)))
            hooks[f"leave_{name}_{field}"] = lambda self, node, n=name, f=field: events.append(("out", n, f, id(node)))
    return type("Recorder", (cst.CSTVisitor,), hooks), events


def _sources():
    yield "syntax", SYNTAX
    for path in FILES:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name,source", list(_sources()), ids=lambda v: v if isinstance(v, str) and "\n" not in v else ""
)
def test_walk_calls_the_hooks_libcst_calls(name, source):
    module = cst.parse_module(source)
    recorder, events = _recorder()
    module.visit(recorder())
    theirs = list(events)
    events.clear()
    walk.Walker(recorder).walk(recorder(), module)
    assert events == theirs, name


def test_a_hook_on_a_node_the_walk_skips_is_refused():
    class Commas(cst.CSTVisitor):
        def visit_Comma(self, node):
            pass

    with pytest.raises(ValueError):
        walk.Walker(Commas)


def test_a_type_whose_order_cannot_be_read_is_visited_by_libcst(monkeypatch):
    recorder, events = _recorder()
    module = cst.parse_module(SYNTAX)
    module.visit(recorder())
    theirs = list(events)
    events.clear()
    monkeypatch.setattr(walk, "_ORDERS", {cst.Call: None, cst.FunctionDef: None})
    walk.Walker(recorder).walk(recorder(), module)
    assert events == theirs


def _signature(facts: Facts) -> list:
    number: dict[int, int] = {}

    def n(x):
        return None if x is None else number.setdefault(id(x), len(number))

    out: list = []
    for s in facts.scopes:
        out.append(
            (
                n(s.node),
                s.kind,
                n(s.parent),
                [(k, [n(v) for v in vs]) for k, vs in s.assigns.items()],
                [(k, [(n(a), n(b)) for a, b in vs]) for k, vs in s.item_sets.items()],
                [(k, [(n(a), i) for a, i in vs]) for k, vs in s.unpacked.items()],
                [(k, [n(v) for v in vs]) for k, vs in s.aug_updates.items()],
                sorted(s.params),
                [n(c) for c in s.calls],
                [n(i.node) for i in s.indexes],
                [n(c) for c in s.comprehensions],
                s.has_backward,
                s.has_yield,
                s.returns,
            )
        )
    for loop in facts.loops:
        out.append(
            (
                n(loop.node),
                loop.targets,
                [n(c) for c in loop.calls],
                [n(i) for i in loop.indexes],
                [(n(a), n(b)) for a, b in loop.assigns],
                [(n(a), b) for a, b in loop.next_of],
                [n(w) for w in loop.withs],
                [(n(a), b) for a, b in loop.ifs],
                sorted(loop.varying),
                [n(c) for c in loop.comprehensions],
                loop.has_backward,
                n(loop.parent),
            )
        )
    for c in facts.calls:
        out.append(
            (
                n(c.node),
                n(c.scope),
                [(n(lp), b) for lp, b in c.loops],
                [n(w) for w in c.withs],
                c.statement,
                c.conditional,
                [(n(a), b) for a, b in c.under],
            )
        )
    out.append(
        (
            [n(x) for x in facts.import_nodes],
            sorted(facts.bound),
            [(n(a), n(b)) for a, b in facts.attr_assigns],
            sorted(facts.idents),
            n(facts.main_guard),
            [n(s) for s in facts.functions],
            facts.imports.names,
        )
    )
    return out


@pytest.mark.parametrize(
    "name,source", list(_sources()), ids=lambda v: v if isinstance(v, str) and "\n" not in v else ""
)
def test_facts_are_those_the_libcst_visit_recorded(name, source, monkeypatch):
    module = cst.parse_module(source)
    ours = _signature(Facts(module, source))
    monkeypatch.setattr(facts_module._WALKER, "walk", lambda visitor, node: node.visit(visitor))
    assert ours == _signature(Facts(module, source)), name


def test_orders_read_by_indentation_are_those_read_by_inspect(monkeypatch):
    """walk._block reads each libcst node type's `_visit_and_replace_children` from the source lines
    by indentation (inspect.getsource tokenized every block: a fiftieth of a run); every node type's
    order is the one read through inspect, and a block that does not parse alone is left to it."""
    kinds = [t for t in walk._subclasses(cst.CSTNode) if "_visit_and_replace_children" in t.__dict__]
    fast = {t: walk._order(t) for t in kinds}
    assert sum(walk._block(t._visit_and_replace_children) is not None for t in kinds) == len(kinds) > 200
    monkeypatch.setattr(walk, "_ORDERS", {})
    monkeypatch.setattr(walk, "_block", lambda function: None)
    assert {t: walk._order(t) for t in kinds} == fast
    assert sum(order is not None for order in fast.values()) > 200


def test_a_block_cut_short_is_left_to_inspect(tmp_path, monkeypatch):
    source = (
        'class K:\n    def f(self):\n        x = """\ncolumn zero\n"""\n        return visit_required(self, "a", x)\n'
    )
    path = tmp_path / "k.py"
    path.write_text(source)
    namespace: dict = {}
    exec(compile(source, str(path), "exec"), namespace)
    assert walk._block(namespace["K"].f) is None  # the string's line at column 0 ends the block early
    commented = "class K:\n    def f(self):\n    # a comment as deep as the def\n        return 1\n"
    path.write_text(commented)
    namespace = {}
    exec(compile(commented, str(path), "exec"), namespace)
    import linecache

    linecache.checkcache(str(path))
    tree = walk._block(namespace["K"].f)
    assert tree is not None and len(tree.body[0].body) == 1
