"""One walk over a module's CST that records what the checks ask about: imports, every call with
its enclosing scope, loops and `with` blocks, assignments per scope, and the loops themselves.

The checks read these facts instead of walking the tree again: one walk is a large share of the
cost of linting a file, and metadata (positions) is resolved only for files that have findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import NamedTuple

import libcst as cst
from libcst._position import CodePosition

from archlint.code import codegen
from archlint.code.names import ImportTable, dotted
from archlint.code.positions import Positions, dropped_indent
from archlint.code.project_facts import EMPTY
from archlint.code.source import split_lines
from archlint.code.walk import Walker

# Identifiers whose mere presence the checks care about (a set lookup per Name node).
_WATCHED = frozenset(
    {"cuda", "autocast", "GradScaler", "bfloat16", "float16", "half", "no_sync", "accelerator", "Accelerator"}
)
_CUDA_SIGNS = frozenset({"cuda", "accelerator", "Accelerator"})
_CONFIGS = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "params", "FLAGS", "settings"})
# Calls that run the backward pass without spelling `.backward()` on the loss: DeiT/MAE-style
# `loss_scaler(loss, optimizer)`, Lightning's `manual_backward`.
_BACKWARD_ATTRS = frozenset({"backward", "manual_backward"})


def is_backward_call(node: cst.Call) -> bool:
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _BACKWARD_ATTRS:
        return True
    name = func.value if isinstance(func, cst.Name) else (func.attr.value if isinstance(func, cst.Attribute) else "")
    return name.lower().endswith("loss_scaler") and bool(node.args)


@dataclass(eq=False, slots=True)  # slots: a file has ~25,000 scopes, loops and calls per MB
class Scope:
    node: cst.CSTNode
    parent: Scope | None
    kind: str  # module | function | class
    assigns: dict[str, list[cst.BaseExpression | None]] = field(default_factory=dict)  # None: not a plain value
    item_sets: dict[str, list[tuple[cst.BaseExpression, cst.BaseExpression]]] = field(default_factory=dict)
    # `a, b = f()`: name → [(value, index in the target tuple)] (assigns holds None for these)
    unpacked: dict[str, list[tuple[cst.BaseExpression, int]]] = field(default_factory=dict)
    aug_updates: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    calls: list[CallSite] = field(default_factory=list)
    indexes: list[IndexSite] | tuple = ()  # computed indexings in the body (a list once there is one)
    # comprehensions in the body, outside lambdas and nested defs, in source order (recorded in the
    # one walk: a walk of the body per question was 15% of the lint time)
    comprehensions: list[cst.BaseExpression] | tuple = ()  # a list once there is one: most scopes have none
    has_backward: bool = False  # the scope's own body runs a backward pass
    has_yield: bool = False  # a generator
    returns: bool = False  # has a `return <value>`

    @property
    def qualname(self) -> str:
        """`Trainer.step`, `main.<locals>` parts dropped: the dotted path of defs down to this scope."""
        parts, scope = [], self
        while scope is not None and scope.kind != "module":
            parts.append(scope.node.name.value)
            scope = scope.parent
        return ".".join(reversed(parts))

    def binds(self, name: str) -> bool:
        """Is `name` assigned (not imported) in this scope or one it can see?"""
        return self.lookup(name) is not None

    def lookup(self, name: str) -> Binding | None:
        """The assignments of `name` in the innermost scope that assigns it (params count)."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.params:
                return Binding(scope, [None])
            if name in scope.assigns:
                return Binding(scope, scope.assigns[name])
            scope = scope.parent
            while scope is not None and scope.kind == "class":  # class bodies do not enclose methods
                scope = scope.parent
        return None


class Span(NamedTuple):
    """Where a node is in the file: line 1-based, column 0-based (libcst's CodePositions)."""

    start: CodePosition
    end: CodePosition


class Binding(NamedTuple):
    """Where a name is bound, as Scope.lookup finds it: the scope, and the values assigned to it
    there in source order (None for one that is not a plain value: a parameter, a loop target,
    a def, an import-free `a, b = f()`)."""

    scope: Scope
    values: list[cst.BaseExpression | None]


@dataclass(eq=False, slots=True)
class Loop:
    node: cst.For | cst.While
    scope: Scope
    parent: Loop | None
    targets: list[str]  # names bound per iteration by the loop header
    calls: list[CallSite] = field(default_factory=list)
    indexes: list[IndexSite] | tuple = ()  # computed indexings in the body, as Scope's
    assigns: list[tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]] = field(default_factory=list)
    next_of: list[tuple[cst.BaseExpression, list[str]]] = field(default_factory=list)  # x, y = next(it)
    withs: tuple[cst.BaseExpression, ...] = ()  # `with` items around the loop in its function
    ifs: list[tuple[cst.If, bool]] = field(default_factory=list)  # `if` statements in it; bool: nested in another
    varying: set[str] = field(default_factory=set)  # names (roots of targets) the loop binds or updates
    comprehensions: list[cst.BaseExpression] | tuple = ()  # in the body, as Scope's
    has_backward: bool = False

    @property
    def iter(self) -> cst.BaseExpression | None:
        return self.node.iter if isinstance(self.node, cst.For) else None


class Around(NamedTuple):
    """A loop around a call or an indexing (of its own function)."""

    loop: Loop
    conditional: bool  # under an `if`/`except`/conditional expression inside that loop


@dataclass(eq=False, slots=True)
class CallSite:
    node: cst.Call
    scope: Scope
    loops: tuple[Around, ...]  # enclosing loops of this function, innermost last
    withs: tuple[cst.BaseExpression, ...]  # enclosing `with` items of this function, outermost first
    statement: bool  # the call is a whole expression statement
    conditional: bool = False  # under an `if`/`except`/conditional expression of its own function
    # Those conditionals, innermost last, each with the number of this function's loops around it
    # (an `if` at depth k is inside site.loops[:k]).
    under: tuple[tuple[cst.CSTNode, int], ...] = ()


@dataclass(eq=False, slots=True)
class IndexSite:
    """`x[mask]`, `x[:n]`, `x[idx]`: an indexing whose index is computed, not a literal. With a boolean
    mask or a bound read from a device tensor it waits for the GPU (AL401). Placed as a CallSite is."""

    node: cst.Subscript
    scope: Scope
    loops: tuple[Around, ...]
    conditional: bool
    under: tuple[tuple[cst.CSTNode, int], ...]
    stored: cst.BaseExpression | None = None  # the value assigned when the indexing is an assignment target


def _computed(element: cst.SubscriptElement) -> bool:
    """An index that is not a literal: `mask`, `acc > 0.5`, `:n` (not `0`, `"key"`, `:-1`, `...`)."""
    part = element.slice
    if isinstance(part, cst.Index):
        return not isinstance(
            part.value,
            (cst.Integer, cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis, cst.UnaryOperation, cst.Tuple),
        ) and not (isinstance(part.value, cst.Name) and part.value.value == "None")
    return any(
        bound is not None and not isinstance(bound, (cst.Integer, cst.UnaryOperation))
        for bound in (part.lower, part.upper)
    )


_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The CST nodes in a node's fields: `node.children`'s nodes, in field order rather than source
    order (for questions order does not change: any, all, sets). libcst's `children` rebuilds the
    node to list them, which made it ~6% of the lint time."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(f.name for f in fields(node))
    out = []
    for name in names:
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            out += [v for v in value if _is_node(type(v))]
        elif _is_node(value_type):
            out.append(value)
        elif isinstance(value, (tuple, list)):  # a subclass of one
            out += [v for v in value if _is_node(type(v))]
    return out


_NODE_TYPES: dict[type, bool] = {}


def _is_node(value_type: type) -> bool:
    """issubclass(value_type, CSTNode), cached: isinstance against libcst's abstract CSTNode goes
    through ABCMeta each time."""
    found = _NODE_TYPES.get(value_type)
    if found is None:
        found = _NODE_TYPES[value_type] = issubclass(value_type, cst.CSTNode)
    return found


def target_names(node: cst.CSTNode) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for el in node.elements for n in target_names(el.value)]
    if isinstance(node, cst.StarredElement):
        return target_names(node.value)
    return []


class _Open:
    """A loop the collector is inside, with the depth of conditionals around the current node
    within it (> 0: not every iteration reaches the node)."""

    __slots__ = ("loop", "depth")

    def __init__(self, loop: Loop) -> None:
        self.loop, self.depth = loop, 0


class _Collector(cst.CSTVisitor):
    def __init__(self, facts: Facts) -> None:
        self.f = facts
        self.scope = facts.module_scope
        self.loops: list[_Open] = []  # the loops of this function around the current node, outermost first
        self.withs: list[cst.BaseExpression] = []
        self.saved: list[tuple] = []
        self.stmt_call: cst.Call | None = None
        self.cond = 0  # conditional depth within the current function
        self.under: list[tuple[cst.CSTNode, int]] = []  # the conditionals around the current node
        self.bodies: list[Loop] = []  # the loops of this function whose body holds the current node
        self.in_body = True  # in the current scope's body (not a decorator, default or base)
        self.lambdas = 0  # lambdas around the current node
        self.stores: dict[int, cst.BaseExpression] = {}  # id(subscript target) → the value assigned to it

    # scopes -----------------------------------------------------------------
    def _enter(self, node: cst.CSTNode, kind: str) -> None:
        self.saved.append((self.scope, self.loops, self.withs, self.cond, self.under, self.bodies, self.in_body))
        self.scope = Scope(node, self.scope, kind)
        self.f.scopes.append(self.scope)
        self.loops, self.withs, self.cond, self.under, self.bodies, self.in_body = [], [], 0, [], [], False

    def _leave(self, node: cst.CSTNode) -> None:
        self.scope, self.loops, self.withs, self.cond, self.under, self.bodies, self.in_body = self.saved.pop()

    def _body(self, node: cst.CSTNode) -> None:
        self.in_body = True

    def _body_done(self, node: cst.CSTNode) -> None:
        self.in_body = False

    visit_FunctionDef_body = visit_ClassDef_body = _body
    leave_FunctionDef_body = leave_ClassDef_body = _body_done

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.f.bound.add(node.name.value)
        self.scope.assigns.setdefault(node.name.value, []).append(None)
        self._enter(node, "function")
        self.f.functions.append(self.scope)
        p = node.params
        for param in (*p.posonly_params, *p.params, *p.kwonly_params):
            self.scope.params.add(param.name.value)
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                self.scope.params.add(star.name.value)
        self.f.bound |= self.scope.params

    leave_FunctionDef = _leave

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.f.bound.add(node.name.value)
        self.scope.assigns.setdefault(node.name.value, []).append(None)
        self._enter(node, "class")

    leave_ClassDef = _leave

    # imports and bindings -----------------------------------------------------
    def visit_Import(self, node: cst.Import) -> bool:
        self.f.imports.add(node)
        self.f.import_nodes.append(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.f.imports.add(node)
        self.f.import_nodes.append(node)
        return False

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            self.scope.assigns.setdefault(target.value, []).append(value)
            self.f.bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for name in target_names(target):
                self.scope.assigns.setdefault(name, []).append(None)
                self.f.bound.add(name)
            if value is not None:
                for i, el in enumerate(target.elements):
                    if isinstance(el.value, cst.Name):
                        self.scope.unpacked.setdefault(el.value.value, []).append((value, i))
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and value is not None:
            if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                key = target.slice[0].slice.value
                self.scope.item_sets.setdefault(target.value.value, []).append((key, value))
        elif isinstance(target, cst.Attribute) and value is not None:
            self.f.attr_assigns.append((target, value))
        for entry in self.loops:
            entry.loop.assigns.append((target, value))
        self._vary(target)

    def _vary(self, target: cst.BaseExpression) -> None:
        """Every enclosing loop binds or updates the target's root name on each iteration."""
        names = target_names(target) or ([root] if (root := _root(target)) else [])
        for entry in self.loops:
            entry.loop.varying.update(names)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind(t.target, node.value)
            if isinstance(t.target, cst.Subscript):
                self.stores[id(t.target)] = node.value
        value = node.value
        if (
            self.loops
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "next"
            and value.args
        ):
            names = [n for t in node.targets for n in target_names(t.target)]
            self.loops[-1].loop.next_of.append((value.args[0].value, names))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._vary(node.target)
        if isinstance(node.target, cst.Name):
            if isinstance(node.operator, cst.BitOrAssign):
                self.scope.aug_updates.setdefault(node.target.value, []).append(node.value)
            else:
                self.scope.assigns.setdefault(node.target.value, []).append(None)

    # control flow --------------------------------------------------------------
    def _push_loop(self, node: cst.For | cst.While, targets: list[str]) -> None:
        parent = self.loops[-1].loop if self.loops else None
        loop = Loop(node, self.scope, parent, targets, withs=tuple(self.withs), varying=set(targets))
        self.f.loops.append(loop)
        for entry in self.loops:
            entry.loop.varying.update(targets)
        self.loops.append(_Open(loop))

    def visit_For(self, node: cst.For) -> None:
        names = target_names(node.target)
        for name in names:
            self.scope.assigns.setdefault(name, []).append(None)
        self.f.bound.update(names)
        self._push_loop(node, names)

    def leave_For(self, node: cst.For) -> None:
        self.loops.pop()

    def visit_While(self, node: cst.While) -> None:
        self._push_loop(node, [])

    def leave_While(self, node: cst.While) -> None:
        self.loops.pop()

    def _loop_body(self, node: cst.For | cst.While) -> None:
        self.bodies.append(self.loops[-1].loop)

    def _loop_body_done(self, node: cst.For | cst.While) -> None:
        self.bodies.pop()

    visit_For_body = visit_While_body = _loop_body
    leave_For_body = leave_While_body = _loop_body_done

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.lambdas += 1

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.lambdas -= 1

    def _comprehension(self, node: cst.BaseExpression) -> None:
        if self.lambdas:
            return
        for holder in ([self.scope] if self.in_body else []) + self.bodies:
            if holder.comprehensions:
                holder.comprehensions.append(node)
            else:
                holder.comprehensions = [node]

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _cond(self, step: int, node: cst.CSTNode | None = None) -> None:
        self.cond += step
        for entry in self.loops:
            entry.depth += step
        if step > 0:
            self.under.append((node, len(self.loops)))
        elif step < 0:
            self.under.pop()

    def visit_If(self, node: cst.If) -> None:
        for entry in self.loops:
            entry.loop.ifs.append((node, entry.depth > 0))
        if self.scope.kind == "module" and _is_main_guard(node.test):
            self.f.main_guard = node

    # The test of an `if` runs every time (`if not math.isfinite(loss.item()):`); its branches do not,
    # unless the test only checks a type or presence (`if isinstance(v, torch.Tensor):`,
    # `if writer is not None:`): such a branch runs on every step that reaches it.
    def visit_If_body(self, node: cst.If) -> None:
        self._cond(0 if _is_guard(node.test) else 1, node)

    def leave_If_body(self, node: cst.If) -> None:
        self._cond(0 if _is_guard(node.test) else -1)

    def visit_If_orelse(self, node: cst.If) -> None:
        self._cond(0 if _is_guard(node.test) else 1, node)

    def leave_If_orelse(self, node: cst.If) -> None:
        self._cond(0 if _is_guard(node.test) else -1)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._cond(1, node)

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self._cond(-1)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._cond(1, node)

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._cond(-1)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            self.withs.append(item.item)
            if item.asname is not None:
                self._bind(item.asname.name, None)

    def leave_With(self, node: cst.With) -> None:
        del self.withs[len(self.withs) - len(node.items) :]

    def visit_Yield(self, node: cst.Yield) -> None:
        self.scope.has_yield = True

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.scope.returns = True

    # expressions ---------------------------------------------------------------
    def visit_Expr(self, node: cst.Expr) -> None:
        self.stmt_call = node.value if isinstance(node.value, cst.Call) else None

    def visit_Call(self, node: cst.Call) -> None:
        site = CallSite(
            node,
            self.scope,
            tuple(Around(entry.loop, entry.depth > 0) for entry in self.loops),
            tuple(self.withs),
            node is self.stmt_call,
            self.cond > 0,
            tuple(self.under),
        )
        self.f.calls.append(site)
        self.scope.calls.append(site)
        for entry in self.loops:
            entry.loop.calls.append(site)
        if is_backward_call(node):
            for entry in self.loops:
                entry.loop.has_backward = True
            self.scope.has_backward = True

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.lambdas or not any(_computed(el) for el in node.slice):
            return
        site = IndexSite(
            node,
            self.scope,
            tuple(Around(entry.loop, entry.depth > 0) for entry in self.loops),
            self.cond > 0,
            tuple(self.under),
            self.stores.pop(id(node), None),
        )
        for holder in [self.scope] + [entry.loop for entry in self.loops]:
            if holder.indexes:
                holder.indexes.append(site)
            else:
                holder.indexes = [site]

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in _WATCHED:
            self.f.idents.add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda" in node.value:
            self.f.idents.add("cuda")

    def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
        if "cuda" in node.value:  # f"cuda:{args.gpu}"
            self.f.idents.add("cuda")


_WALKER = Walker(_Collector)


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _is_guard(test: cst.BaseExpression) -> bool:
    """A test of type or presence only: isinstance/hasattr/callable, `is (not) None`, and/or/not of those."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _is_guard(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _is_guard(test.left) and _is_guard(test.right)
    if isinstance(test, cst.Call):
        return isinstance(test.func, cst.Name) and test.func.value in ("isinstance", "hasattr", "callable")
    if isinstance(test, cst.Comparison):
        return all(
            isinstance(c.operator, (cst.Is, cst.IsNot))
            and isinstance(c.comparator, cst.Name)
            and c.comparator.value == "None"
            for c in test.comparisons
        )
    return False


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, right = test.left, test.comparisons[0].comparator
    names = {dotted(left), dotted(right)}
    strings = {n.evaluated_value for n in (left, right) if isinstance(n, cst.SimpleString)}
    return "__name__" in names and "__main__" in strings


class Facts:
    """Everything the checks know about one file, plus lazy positions for reporting."""

    def __init__(self, module: cst.Module, source: str, positions: Positions | None = None) -> None:
        """`positions`: those of an earlier Facts of the same module (engine.KeptTrees), if any."""
        self.module = module
        self.source = source
        self.lines = split_lines(source)
        self.module_scope = Scope(module, None, "module")
        self.scopes: list[Scope] = [self.module_scope]
        self.functions: list[Scope] = []
        self.imports = ImportTable()
        self.import_nodes: list[cst.Import | cst.ImportFrom] = []
        self.bound: set[str] = set()
        self.calls: list[CallSite] = []
        self.loops: list[Loop] = []
        self.attr_assigns: list[tuple[cst.Attribute, cst.BaseExpression]] = []
        self.idents: set[str] = set()
        self.main_guard: cst.If | None = None
        self._positions = positions
        self._shifts: dict[int, int] | None = None  # known on the first position asked
        self.project = EMPTY  # what the rest of the project says about this file's names (see project.py)
        self.ast_calls: list | None = None  # the precheck's records of the file's calls, if it made them
        _WALKER.walk(_Collector(self), module)  # libcst's own module.visit rebuilt every node: ~3x the time
        self._qn: dict[int, str | None] = {}
        self._built = tuple(self.__dict__)  # what the walk found: what again() keeps

    def again(self) -> Facts:
        """These facts as a fresh Facts of the same tree would be, for the file's lint in its project
        context (engine.KeptTrees): what the walk found stays, and so do the positions resolved;
        every answer the summary cached here goes (some depend on the context; the checks, deferred,
        never ran on them), and so do the context and the precheck's call records."""
        built = self._built
        for key in [k for k in self.__dict__ if k not in built and k != "_built"]:
            del self.__dict__[key]
        self._qn = {}
        self.project = EMPTY
        self.ast_calls = None
        return self

    def release(self) -> None:
        """Break the facts' reference cycles once the file is linted (a scope's calls name their
        scope, a loop's calls their loop, the checks' caches here hold records that name these
        facts): the tree is then freed as soon as nothing refers to it, not by the garbage
        collector, whose passes over every tree still waiting were a tenth of a run. The facts
        are of no use afterwards."""
        for scope in self.scopes:
            scope.calls, scope.indexes = [], ()
        for loop in self.loops:
            loop.calls, loop.indexes = [], ()
        self.__dict__.clear()

    def qname(self, node: cst.BaseExpression, scope: Scope | None = None) -> str | None:
        """The imported name an expression refers to, seen from `scope` (default: module level).

        A name the scope chain also assigns (a variable, parameter, def or class of that name) is
        not the import: None, so a shadowed import never produces a finding.
        """
        scope = scope or self.module_scope
        key = (id(node) << 64) | id(scope)  # one int, not a tuple of two: ~75,000 keys per MB of source
        if key not in self._qn:
            head = node
            while isinstance(head, cst.Attribute):
                head = head.value
            shadowed = isinstance(head, cst.Name) and scope.binds(head.value)
            self._qn[key] = None if shadowed else self.imports.qualify(node)
        return self._qn[key]

    def calls_to(self, *names: str) -> list[CallSite]:
        """The calls of these imported names, in source order. (An index by name, built on the
        first question: the checks ask ~13 times per file, each a pass over every call.)"""
        index = self.__dict__.get("_by_qname")
        if index is None:
            index = self.__dict__["_by_qname"] = {}
            for i, site in enumerate(self.calls):
                index.setdefault(self.qname(site.node.func, site.scope), []).append(i)
        if len(names) == 1:
            return [self.calls[i] for i in index.get(names[0], ())]
        return [self.calls[i] for i in sorted(i for name in set(names) for i in index.get(name, ()))]

    @property
    def uses_cuda(self) -> bool:
        """The file runs on a GPU: it names CUDA or torch.accelerator / accelerate's Accelerator, or a
        module that calls into it does (devices passed in as parameters)."""
        return bool(self.idents & _CUDA_SIGNS) or self.project.cuda or self._configured_device()

    def _configured_device(self) -> bool:
        """`torch.device(args.device)`, `.to(args.device)`: a device from the command line or a config,
        which training scripts point at a GPU."""
        if "_configured" not in self.__dict__:
            # detectron2 reads its device from its config, whose default is "cuda" (cfg.MODEL.DEVICE)
            found = any(full.split(".")[0] == "detectron2" for full in self.imports.names.values())
            for site in self.calls:
                func = site.node.func
                name = self.qname(func, site.scope)
                if name == "torch.device" or (isinstance(func, cst.Attribute) and func.attr.value == "to"):
                    for arg in site.node.args[:1] if name == "torch.device" else site.node.args:
                        text = dotted(arg.value) or ""
                        if arg.keyword in (None,) or arg.keyword.value == "device":
                            head, _, attr = text.rpartition(".")
                            if attr.lower() == "device" and _CONFIGS & set(head.split(".")):  # cfg.MODEL.DEVICE
                                found = True
            self.__dict__["_configured"] = found
        return self.__dict__["_configured"]

    def code(self, node: cst.CSTNode) -> str:
        return codegen.text(self.module, node)  # module.code_for_node, at a fraction of the cost

    @property
    def positions(self) -> Positions | None:
        """The module's positions, once one was asked for (engine.KeptTrees hands them on)."""
        return self._positions

    def position(self, node: cst.CSTNode) -> Span:
        """Where the node is. Resolved on first use only."""
        if self._positions is None:
            self._positions = Positions(self.module)
        if self._shifts is None:
            self._shifts = dropped_indent(self.lines, self.module) if "\f" in self.source else {}
        start, end = self._positions[node]
        if self._shifts:
            start, end = (CodePosition(p.line, p.column + self._shifts.get(p.line, 0)) for p in (start, end))
        return Span(start, end)
