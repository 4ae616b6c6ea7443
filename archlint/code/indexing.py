"""Syncs that are not a method call on a tensor: indexing with a boolean mask (`x[acc > 0.5]`,
`logits[valid, labels[valid]]`), slicing with a bound read from a tensor (`x[:lengths.max()]`), and
the data-dependent-shape calls (`torch.nonzero`, `masked_select`, one-argument `torch.where`) and
`.to("cpu")` copies. Each needs the result's size, or the value, on the host before it can return:
the host waits for the GPU to finish."""

from __future__ import annotations

import libcst as cst

from archlint.code.facts import Facts, IndexSite, Scope
from archlint.code.tensors import holds_tensor

# Tensor methods and torch functions whose result is a boolean tensor.
_MASK_METHODS = frozenset(
    {
        "ge",
        "gt",
        "le",
        "lt",
        "eq",
        "ne",
        "bool",
        "isnan",
        "isinf",
        "isfinite",
        "logical_not",
        "logical_and",
        "logical_or",
        "logical_xor",
        "isclose",
    }
)
_MASK_FUNCTIONS = frozenset(f"torch.{m}" for m in _MASK_METHODS)
# Results whose size depends on the values: the host reads the count before it can return.
_SIZED_METHODS = {"nonzero": "nonzero()", "masked_select": "masked_select()", "argwhere": "argwhere()"}
_SIZED_FUNCTIONS = {
    "torch.nonzero": "torch.nonzero()",
    "torch.masked_select": "torch.masked_select()",
    "torch.argwhere": "torch.argwhere()",
}
_CONFIG_ROOTS = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "params", "FLAGS", "settings"})


def _literal(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString))
        or (isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float)))
        or (isinstance(node, cst.Name) and node.value in ("None", "True", "False"))
    )


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def is_mask(node: cst.BaseExpression, scope: Scope, facts: Facts, depth: int = 0) -> bool:
    """Does the expression give a boolean tensor: a comparison of a computed value (`acc > 0.5`,
    `labels != -1`), `.ge()`/`torch.isnan()`, `~m`, `m1 & m2`, or a name only ever assigned one?"""
    if depth > 3:
        return False
    if isinstance(node, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in node.comparisons):
            return False
        operands = [node.left] + [c.comparator for c in node.comparisons]
        return not all(_literal(op) or _root(op) in _CONFIG_ROOTS for op in operands)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return is_mask(node.expression, scope, facts, depth + 1) or isinstance(node.expression, cst.Name)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return is_mask(node.left, scope, facts, depth + 1) or is_mask(node.right, scope, facts, depth + 1)
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MASK_METHODS and facts.qname(func, scope) is None:
            return True
        return facts.qname(func, scope) in _MASK_FUNCTIONS
    if isinstance(node, cst.Name):
        found = scope.lookup(node.value)
        if found is None:
            return False
        values = [v for v in found.values if v is not None]
        return bool(values) and all(is_mask(v, found.scope, facts, depth + 1) for v in values)
    return False


def index_sync(site: IndexSite, names: set[str], facts: Facts) -> str | None:
    """What makes the host wait in this indexing of one of `names`, or None."""
    node = site.node
    if not holds_tensor(node.value, names):
        return None
    if site.stored is not None and not holds_tensor(site.stored, names):
        return None  # `weight[targets > 0.5] = 2.0`: a scalar fill runs as masked_fill_, no count needed
    for element in node.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            if is_mask(part.value, site.scope, facts):
                return "indexing with a boolean mask"
        elif any(
            isinstance(bound, (cst.Call, cst.Subscript)) and holds_tensor(bound, names)
            for bound in (part.lower, part.upper)
        ):  # `x[:lengths.max()]` (a bare name may be an int)
            return "slicing with a bound read from a tensor"
    return None


def call_sync(call: cst.Call, names: set[str], facts: Facts, scope: Scope) -> str | None:
    """`torch.nonzero(x)`, `x.masked_select(m)`, `torch.where(cond)`, `x.to("cpu")` of a tensor."""
    func = call.func
    qname = facts.qname(func, scope)
    args = [a.value for a in call.args]
    if qname in _SIZED_FUNCTIONS or qname == "torch.where" and len(call.args) == 1:
        if args and any(holds_tensor(a, names) or is_mask(a, scope, facts) and _root(a) in names for a in args):
            return _SIZED_FUNCTIONS.get(qname, "torch.where(condition)")
        return None
    if not isinstance(func, cst.Attribute) or qname is not None or not holds_tensor(func.value, names):
        return None
    if func.attr.value in _SIZED_METHODS:
        return _SIZED_METHODS[func.attr.value]
    if func.attr.value == "to":
        for arg in call.args:
            if arg.keyword is None or arg.keyword.value == "device":
                if _host_device(arg.value, facts, scope):
                    return '.to("cpu")'
                if arg.keyword is None:
                    break
    return None


def _host_device(node: cst.BaseExpression, facts: Facts, scope: Scope) -> bool:
    """ "cpu", torch.device("cpu")."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value == "cpu"
    if isinstance(node, cst.Call) and facts.qname(node.func, scope) == "torch.device" and node.args:
        return _host_device(node.args[0].value, facts, scope)
    return False
