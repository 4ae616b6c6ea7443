"""A read-only walk over a libcst tree that calls a CSTVisitor's hooks as `node.visit(visitor)` does,
in the same order, at a fraction of the cost.

libcst's own traversal rebuilds every node it passes (`_visit_and_replace_children` constructs a
copy, validated, of each node, whitespace included), which made the facts walk (facts.py) as costly
as parsing the file. This walk reads the fields instead, in the order libcst visits them (taken
once per node type from libcst's own `_visit_and_replace_children`, see `_order`), and does not go
into whitespace and punctuation nodes, which hold no node a hook can be on. A node type whose order
cannot be read this way (no source installed) is visited by libcst itself, and nothing changes but
the time.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from typing import Any, cast

import libcst as cst

from archlint.code.positions import TOKENS


def _subclasses(base: type) -> list[type]:
    out: list[type] = []
    stack: list[type] = [base]
    while stack:
        subclasses: list[type] = stack.pop().__subclasses__()
        for sub in subclasses:
            out.append(sub)
            stack.append(sub)
    return out


# Nodes that hold only whitespace, comments and tokens: nothing a hook of a visitor here is on.
# (A visitor with a hook on one of these cannot use this walk: Walker refuses it.)
LEAVES: frozenset[type] = TOKENS | {
    cst.Comment,
    cst.Asynchronous,
    *(
        t
        for base in (cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp)
        for t in _subclasses(base)
    ),
}

_ORDERS: dict[type, tuple[tuple[str, bool], ...] | None] = {}


def _block(function: Any) -> ast.Module | None:
    """A method's source, as inspect.getsource gives it (dedented) and parsed, read by indentation from the
    lines linecache holds: the lines after the `def` up to the first one indented no deeper than it
    (comments, blank lines and a signature's closing parenthesis aside). inspect.getsource finds the module and tokenizes the block:
    ~0.4 ms a node type, a fiftieth of a run that plans 70. None when the lines cannot be had or the
    block does not parse as that one function alone (inspect.getsource answers then)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    start = code.co_firstlineno - 1
    if not 0 <= start < len(lines) or not lines[start].lstrip().startswith("def "):
        return None  # a decorated method starts at its decorator: left to inspect
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines):
        line = lines[end]
        text = line.lstrip()
        if text and not text.startswith(("#", ")", "]", "}")) and len(line) - len(text) <= indent:
            break
        end += 1
    try:
        tree = ast.parse(textwrap.dedent("".join(lines[start:end])))
    except SyntaxError:
        return None
    body = tree.body
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef) or body[0].name != code.co_name:
        return None
    return tree


def _order(node_type: Any) -> tuple[tuple[str, bool], ...] | None:
    """The fields libcst visits, in its order: the field names its `_visit_and_replace_children`
    passes to visit_required/visit_sequence/... (read from libcst's source, once per type), each
    with whether it is visited when None (`x if x is not None else None` skips it, hooks included);
    None when the source cannot be read."""
    if node_type not in _ORDERS:
        method = node_type._visit_and_replace_children
        try:
            tree = _block(method) or ast.parse(textwrap.dedent(inspect.getsource(method)))
        except (OSError, TypeError, SyntaxError):
            _ORDERS[node_type] = None
            return None
        guarded = set()  # visit calls under `... if cond else None`
        for n in ast.walk(tree):
            if isinstance(n, ast.IfExp) and isinstance(n.orelse, ast.Constant) and n.orelse.value is None:
                guarded |= {id(c) for c in ast.walk(n.body)}
        calls = sorted(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id.startswith("visit_")
                and len(n.args) >= 2
                and isinstance(n.args[1], ast.Constant)
                and isinstance(n.args[1].value, str)
            ),
            key=lambda n: (n.lineno, n.col_offset),
        )
        names: dict[str, bool] = {}
        for call in calls:
            names.setdefault(str(cast(ast.Constant, call.args[1]).value), id(call) not in guarded)
        fields = set(node_type.__dataclass_fields__)
        _ORDERS[node_type] = tuple(names.items()) if set(names) <= fields else None
    return _ORDERS[node_type]


Hook = Callable[[cst.CSTVisitor, cst.CSTNode], object]


class Walker:
    """`walk(node)`: the visitor's visit_/leave_ hooks (and visit_<Type>_<field> ones) on every
    node below `node`, as libcst calls them. One per visitor class: the plans are per node type."""

    def __init__(self, visitor_type: type[cst.CSTVisitor]) -> None:
        # the visitor's own hooks (libcst's CSTVisitor declares an empty one for every node type)
        self.hooks = {
            name: hook
            for name in dir(visitor_type)
            if name.startswith(("visit_", "leave_"))
            and (hook := getattr(visitor_type, name)) is not getattr(cst.CSTVisitor, name, None)
        }
        if any(name.split("_")[1] in {t.__name__ for t in LEAVES} for name in self.hooks):
            raise ValueError(f"{visitor_type.__name__} has a hook on a node this walk does not enter")
        self.visitor_type = visitor_type
        # type → (visit hook, leave hook, ((field, visited when None, before hook, after hook), ...)) or None: libcst's own visit
        self.plans: dict[type, tuple | None] = {}
        # type → whether a value of it is a node to enter (a cache: isinstance against libcst's
        # abstract CSTNode goes through ABCMeta, a tenth of the walk's time)
        self.enter: dict[type, bool] = {}

    def _enters(self, value_type: type) -> bool:
        entered = self.enter[value_type] = value_type not in LEAVES and issubclass(value_type, cst.CSTNode)
        return entered

    def _plan(self, node_type: type) -> tuple | None:
        order = _order(node_type)
        if order is None:
            plan = None
        else:
            hooks, name = self.hooks, node_type.__name__
            fields = tuple(
                (f, when_none, hooks.get(f"visit_{name}_{f}"), hooks.get(f"leave_{name}_{f}")) for f, when_none in order
            )
            plan = (hooks.get(f"visit_{name}"), hooks.get(f"leave_{name}"), fields)
        self.plans[node_type] = plan
        return plan

    def walk(self, visitor: cst.CSTVisitor, node: cst.CSTNode) -> None:
        plans, enter, walk = self.plans, self.enter, self.walk
        node_type = type(node)
        plan = plans[node_type] if node_type in plans else self._plan(node_type)
        if plan is None:
            node.visit(visitor)
            return
        visit, leave, fields = plan
        if visit is None or visit(visitor, node) is not False:
            for field, when_none, before, after in fields:
                value = getattr(node, field)
                if value is None and not when_none:
                    continue
                if before is not None:
                    before(visitor, node)
                value_type = type(value)
                if (
                    value_type is tuple
                    or value_type is list
                    or (value_type not in enter and isinstance(value, (tuple, list)))
                ):
                    for child in value:
                        child_type = type(child)
                        entered = enter.get(child_type)
                        if entered or (entered is None and self._enters(child_type)):
                            walk(visitor, child)
                else:
                    entered = enter.get(value_type)
                    if entered or (entered is None and self._enters(value_type)):
                        walk(visitor, value)
                if after is not None:
                    after(visitor, node)
        if leave is not None:
            leave(visitor, node)
