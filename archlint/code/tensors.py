"""Which names hold device tensors: followed from a training loop's batch and backward (or a
function's tensor parameters) through assignments, iteration and container mutation.

Flow-insensitive within a loop body or a function, a few rounds to a fixed point:

- assignment: `loss = criterion(model(x), y)`; a subscript assignment fills a container
  (`loss_dict["d"] = d_loss` makes `loss_dict` hold tensors);
- iteration: `for dr, dg in zip(real, fake)`, `for i, out in enumerate(outputs)`,
  `for k, v in losses.items()` (the keys are not tensors);
- mutation: `r_losses.append(r_loss)`, `.extend`, `.insert`, `.update`, `.setdefault`;
- host data is cut: a value read back with `.cpu()`, `.numpy()`, `.item()` or `.tolist()` is on the
  host (`correct = pred.eq(y).cpu().sum()`): later reads of it wait for nothing.
"""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.facts import CallSite, Facts, Loop, Scope, children, target_names
from archlint.code.names import dotted

HOST_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
_FILL_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})
# Library calls that return a tensor on the device of their inputs although no argument is one of
# the loop's tensors: the total gradient norm (`grad_norm = clip_grad_norm_(model.parameters(), 1.0)`).
_TENSOR_RESULTS = frozenset({"clip_grad_norm_"})


def host_value(node: cst.BaseExpression) -> bool:
    """The expression's call chain reads the value back to the host (`x.detach().cpu().sum()`)."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in HOST_METHODS and not node.args:
                return True
            node = func.value if isinstance(func, cst.Attribute) else func
        else:
            node = node.value
    return False


def _chain_base(node: cst.BaseExpression) -> cst.BaseExpression:
    """`(epe < 1).float().mean()` → `(epe < 1)`; `loss.data` → `loss`: what a chain of views and
    methods starts from."""
    while True:
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return node


def holds_tensor(node: cst.BaseExpression, names: set[str]) -> bool:
    """Does the expression evaluate to a tensor of `names`: a view or method of one (`loss.data`),
    arithmetic or a comparison on one (`(epe < 1).float().mean()`), or a function's result on one
    (`reduce_tensor(loss.data, n)`, `model(obs[idx])`)?"""
    if host_value(node):
        return False  # `loss.item()`: a number on the host
    base = _chain_base(node)
    if isinstance(base, cst.Name) and base.value in names:
        return True
    # `torch.max(lengths)`, `self.loss_fn(pred, y)`, `(epe < 1)`: computed from one of the tensors
    return not isinstance(node, cst.Name) and df.refs(node, names)


_OPAQUE = frozenset({cst.Lambda, cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp})  # not entered


def _leaf_names(node: cst.CSTNode):
    """Names an expression reads as values (not called functions, not attributes' fields)."""
    kind = type(node)  # type() is: libcst's node classes are final, and isinstance goes through ABCMeta
    if kind is cst.Name:
        yield node.value
    elif kind is cst.Attribute:
        yield from _leaf_names(node.value)
    elif kind is cst.Call:
        if type(node.func) is cst.Attribute:
            yield from _leaf_names(node.func.value)
        for arg in node.args:
            yield from _leaf_names(arg.value)
    elif kind not in _OPAQUE:
        for child in children(node):
            yield from _leaf_names(child)


class _TensorValues:
    """`is_tensor(value, names)`: does assigning this expression make its target a tensor, given the
    names known to hold tensors? For one flow() call: what does not depend on `names` (a tensor
    function's result, the names the expression reads as tensors, a host value) is worked out once
    per expression, not once per round of the fixed point."""

    def __init__(self, facts: Facts | None) -> None:
        self.facts = facts
        self.known: dict[int, tuple[bool, frozenset[str] | None]] = {}  # id(value) → (a tensor result, ref_names)
        self.host: dict[int, bool] = {}  # id(value) → a host value or a plain call (asked once refs hold)

    def is_tensor(self, value: cst.BaseExpression, names: set[str]) -> bool:
        key = id(value)  # the values live as long as the flow() call: their ids stay theirs
        known = self.known.get(key)
        if known is None:
            result = isinstance(value, cst.Call) and (dotted(value.func) or "").rsplit(".", 1)[-1] in _TENSOR_RESULTS
            known = self.known[key] = (result, None if result else df.ref_names(value))
        if known[0]:
            return True
        read = known[1]
        if not (df.refs(value, names) if read is None else not read.isdisjoint(names)):
            return False
        host = self.host.get(key)
        if host is None:
            facts = self.facts
            host = self.host[key] = host_value(value) or bool(facts and df.plain_call(value, facts))
        return not host


def iteration_targets(target: cst.BaseExpression, it: cst.BaseExpression, names: set[str]) -> list[str]:
    """The loop variables that hold tensors when iterating `it`."""
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.args:
        if it.func.value == "enumerate" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            return iteration_targets(target.elements[1].value, it.args[0].value, names)
        if (
            it.func.value == "zip"
            and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == len(it.args)
        ):
            out = []
            for el, arg in zip(target.elements, it.args):
                out += iteration_targets(el.value, arg.value, names)
            return out
        if it.func.value in ("reversed", "sorted", "list", "tuple", "iter") and len(it.args) == 1:
            return iteration_targets(target, it.args[0].value, names)
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args:
        method = it.func.attr.value
        if method == "keys":
            return []
        if method == "items":
            if not df.refs(it.func.value, names):
                return []
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                return target_names(target.elements[1].value)
            return []
    return target_names(target) if df.refs(it, names) else []


def flow(names: set[str], assigns, loops: list[Loop], calls: list[CallSite], facts: Facts | None) -> set[str]:
    """Grow `names` to a fixed point over (target, value) assignments, the loops' headers and the
    calls that fill containers. A target may be a node or a plain name."""
    names = set(names)
    values = _TensorValues(facts)
    # Outputs of calls the region makes (`newvalue = agent.get_value(obs[idx])`): a tensor computed
    # from one (`v_loss = ((newvalue - ret) ** 2).mean()`) makes it a tensor too, though nothing
    # before it is known to be one (a model's output on a buffer built before the loop).
    outputs = set()
    for target, value in assigns:
        if isinstance(value, cst.Call) and not host_value(value):
            outputs.update([target] if isinstance(target, str) else target_names(target))
    for _ in range(4):
        before = len(names)
        for target, value in assigns:
            bound = [target] if isinstance(target, str) else target_names(target)
            if value is not None and names.intersection(bound):
                names.update(n for n in _leaf_names(value) if n in outputs)
        for target, value in assigns:
            if value is None or not values.is_tensor(value, names):
                continue
            if isinstance(target, str):
                names.add(target)
            elif isinstance(target, cst.Subscript):  # `loss_dict["d"] = d_loss`: the container holds tensors
                root = df.root_name(target)
                if root is not None and root not in ("self", "cls"):
                    names.add(root)
            else:
                names.update(target_names(target))
        for loop in loops:
            if loop.iter is not None:
                names.update(iteration_targets(loop.node.target, loop.iter, names))
        for site in calls:
            func = site.node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in _FILL_METHODS
                and isinstance(func.value, cst.Name)
                and func.value.value not in names
                and any(values.is_tensor(a.value, names) for a in site.node.args)
            ):
                names.add(func.value.value)
        if len(names) == before:
            break
    return names


def _descendants(loop: Loop, facts: Facts) -> list[Loop]:
    children = facts.__dict__.get("_loop_children")
    if children is None:  # built once per file: a scan of every loop per loop is quadratic
        children = facts.__dict__["_loop_children"] = {}
        for other in facts.loops:
            if other.parent is not None:
                children.setdefault(id(other.parent), []).append(other)
    out, todo = [], list(children.get(id(loop), ()))
    while todo:
        other = todo.pop()
        out.append(other)
        todo += children.get(id(other), ())
    return out


def tensor_names(bl: df.BatchLoop) -> set[str]:
    """Names in the loop body that hold tensors derived from the batch (images, output, loss, ...)."""
    facts = bl.facts
    seeds = set(bl.batch_names) | df.backward_roots(bl.loop)
    loops = _descendants(bl.loop, facts) if facts is not None else []
    names = flow(seeds, bl.loop.assigns, loops, bl.loop.calls, facts)
    return names | df.comprehensions_tensors(bl.loop.comprehensions, names)


def function_tensors(scope: Scope, seeds: set[str], facts: Facts) -> set[str]:
    """Names of a function that hold tensors, from `seeds` (its tensor parameters, what it draws)."""
    assigns = [(name, v) for name, values in scope.assigns.items() for v in values if v is not None]
    assigns += [(name, v) for name, entries in scope.unpacked.items() for v, _ in entries]
    assigns += [(name, v) for name, entries in scope.item_sets.items() for _, v in entries]  # d["k"] = v
    loops = [loop for loop in facts.loops if loop.scope is scope]
    calls = [site for site in scope.calls if site.scope is scope]
    names = flow(seeds, assigns, loops, calls, facts)
    return names | df.comprehensions_tensors(scope.comprehensions, names)
