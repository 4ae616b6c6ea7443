"""AL313: NumPy math, every training step, on a tensor fetched back from the GPU (`.cpu().numpy()`)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding, sync
from archlint.code.facts import Facts
from archlint.code.tensors import tensor_names
from archlint.diagnostics import Severity

CODES = ("AL313",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"


def _fetch(node: cst.BaseExpression, tensors: set[str]) -> bool:
    """Does the expression (a call chain such as `out.detach().cpu().numpy().ravel()`) turn a tensor
    of the loop into a NumPy array?"""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "numpy"
            and df.root_name(node.func.value) in tensors
        ):
            return True
        node = node.func if isinstance(node, cst.Call) else node.value
    return False


def check(facts: Facts):
    if not facts.uses_cuda:
        return
    # One finding per line: where AL401 already reports a host copy (`np.argmax(out.cpu().numpy())`
    # on one line), its finding covers the line and this rule stays silent.
    synced = {facts.position(f.node).start.line for f in sync.check(facts)}
    for bl in df.training_loops(facts):
        tensors = tensor_names(bl)
        arrays = {}  # name → the line that fetched it
        for target, value in bl.loop.assigns:
            if value is not None and _fetch(value, tensors):
                for name in df.target_names(target):
                    arrays.setdefault(name, facts.position(value).start.line)
        reported = set()
        for site in bl.loop.calls:
            where = df.in_loop(site, bl.loop)
            if where is None or where.conditional:
                continue  # under an `if` (every N steps): not every step
            qname = facts.qname(site.node.func, site.scope) or ""
            if not qname.startswith("numpy."):
                continue
            used = sorted({n for a in site.node.args for n in arrays if df.refs(a.value, {n})} - reported)
            if not used or facts.position(site.node).start.line in synced:
                continue
            reported.update(used)
            what = ", ".join(f"`{n}` (line {arrays[n]})" for n in used)
            yield Finding(
                "AL313",
                site.node,
                f"{qname.replace('numpy.', 'np.', 1)}() on {what}, fetched from the GPU with .numpy() "
                "on every training step: the copy waits for the GPU and the math runs on "
                "the CPU; compute it with torch on the device and read the result every N steps",
            )
