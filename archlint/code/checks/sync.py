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
            if what:
                seen.add(id(site.node))
                yield Finding(
                    "AL401",
                    site.node,
                    f"{what} on every training step waits for the GPU to finish: keep the value on the "
                    "GPU (accumulate with .detach()) and read it every N steps or once per epoch",
                )
