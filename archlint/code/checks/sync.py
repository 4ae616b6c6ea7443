"""AL401: a GPU→CPU synchronization on every iteration of a CUDA training loop."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts

CODES = ("AL401",)
_METHODS = {"item": ".item()", "cpu": ".cpu()", "numpy": ".numpy()", "tolist": ".tolist()"}
_BUILTINS = ("print", "float", "int", "bool")


def _plain_tensor(node: cst.BaseExpression, names: set[str]) -> bool:
    """A tensor variable itself (not a call on it, which is reported on its own)."""
    return isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)) and df.root_name(node) in names


def _syncing_arg(call: cst.Call, names: set[str]) -> bool:
    for arg in call.args:
        value = arg.value
        if _plain_tensor(value, names):
            return True
        if isinstance(value, cst.FormattedString):
            for part in value.parts:
                if isinstance(part, cst.FormattedStringExpression) and _plain_tensor(part.expression, names):
                    return True
    return False


def _syncing_test(test: cst.BaseExpression, names: set[str]) -> bool:
    """An `if` condition that needs a tensor's value on the host (`if loss < best:`, `if torch.isnan(x).any():`)."""
    if isinstance(test, cst.Comparison) and all(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons
    ):
        return False  # identity and membership tests do not read tensor values
    if isinstance(test, cst.UnaryOperation):
        return _syncing_test(test.expression, names)
    if isinstance(test, cst.BooleanOperation):
        return _syncing_test(test.left, names) or _syncing_test(test.right, names)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in ("isinstance", "hasattr"):
        return False
    return df.refs(test, names)


def check(facts: Facts):
    if not facts.uses_cuda:
        return
    seen = set()
    for bl in df.batch_loops(facts):
        if not bl.is_training:
            continue
        names = df.tensor_names(bl)
        for site in bl.loop.calls:
            where = df.in_loop(site, bl.loop)
            if where is None or where[1] or id(site.node) in seen:
                continue  # under an `if` (e.g. every N steps): not every iteration
            func = site.node.func
            what = None
            if isinstance(func, cst.Attribute) and func.attr.value in _METHODS and not site.node.args:
                if df.root_name(func.value) in names:
                    what = _METHODS[func.attr.value]
            elif isinstance(func, cst.Name) and func.value in _BUILTINS:
                rebound = func.value in facts.bound or func.value in facts.imports.names
                if not rebound and _syncing_arg(site.node, names):
                    what = f"{func.value}() of a tensor"
            elif _is_cuda_synchronize(site, facts):
                what = "torch.cuda.synchronize()"
            if what:
                seen.add(id(site.node))
                yield Finding(
                    "AL401",
                    site.node,
                    f"{what} on every training step waits for the GPU to finish: keep the value on the "
                    "GPU (accumulate with .detach()) and read it every N steps or once per epoch",
                )
        for node, nested in bl.loop.ifs:
            if not nested and _syncing_test(node.test, names):
                yield Finding(
                    "AL401",
                    node.test,
                    "`if` on a tensor's value on every training step waits for the GPU to finish: "
                    "decide on the GPU (torch.where, masking) or check every N steps",
                )


def _is_cuda_synchronize(site, facts: Facts) -> bool:
    return facts.qname(site.node.func, site.scope) == "torch.cuda.synchronize"
