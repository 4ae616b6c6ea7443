"""AL413: FSDP with one unit for the whole model: `FullyShardedDataParallel(model)` with no
`auto_wrap_policy` and no other FSDP wrapping in the file, or FSDP2's `fully_shard(model)` called
once, at the root.

One unit is one flat parameter: FSDP all-gathers every parameter before the forward and again
before the backward and reduce-scatters every gradient after it, so the peak holds the whole model
unsharded and no communication overlaps computation. Measured with FSDP2 on 2 ranks (gloo), four
blocks: root only ran 1 all-gather and 1 reduce-scatter per step, per block 8 and 4 (each block
gathered just before it runs)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._distributed import FSDP, FULLY_SHARD, flag
from archlint.code.facts import CallSite, Facts, children
from archlint.code.names import dotted
from archlint.diagnostics import Severity

CODES = ("AL413",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
# wrapping per block by hand: `with enable_wrap(wrapper_cls=FSDP): wrap(block)`
_MANUAL = ("torch.distributed.fsdp.wrap.wrap", "torch.distributed.fsdp.wrap.enable_wrap")


def _within(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    return node is target or any(_within(child, target) for child in children(node))


def _last(node: cst.BaseExpression) -> str:
    return (dotted(node) or "").rsplit(".", 1)[-1]


def _repeated(site: CallSite, facts: Facts) -> bool:
    """Inside a loop or a comprehension (`[FSDP(b) for b in blocks]`), or in a function this file
    calls from a loop or hands on (`model.apply(wrap_block)`)."""
    if site.loops or any(_within(c, site.node) for c in site.scope.comprehensions):
        return True
    scope = site.scope
    if scope.kind != "function":
        return False
    name = scope.node.name.value
    return any(
        (s.loops and _last(s.node.func) == name) or any(_last(a.value) == name for a in s.node.args)
        for s in facts.calls
    )


def _handed_in(site: CallSite, facts: Facts) -> bool:
    """`def apply_fsdp(module): fully_shard(module)` that this file never calls: the callers, and how
    many modules they shard, are elsewhere."""
    scope = site.scope
    if scope.kind != "function" or not site.node.args:
        return False
    root = df.root_name(site.node.args[0].value)
    name = scope.node.name.value
    called = any(_last(s.node.func) == name for s in facts.calls)
    return root in scope.params and not called


def check(facts: Facts):
    found = {
        names: [s for s in facts.calls_to(*FSDP, *FULLY_SHARD, *_MANUAL) if facts.qname(s.node.func, s.scope) in names]
        for names in (FSDP, FULLY_SHARD, _MANUAL)
    }
    if not (found[FSDP] or found[FULLY_SHARD]) or found[_MANUAL]:
        return  # no FSDP, or wrapped per block by hand
    if not any(scope.has_backward for scope in facts.scopes) and not df.training_loops(facts):
        return  # not the file that trains
    for names, keyword in ((FSDP, "auto_wrap_policy"), (FULLY_SHARD, None)):
        sites = found[names]
        if len(sites) != 1 or _repeated(sites[0], facts) or _handed_in(sites[0], facts):
            continue
        site = sites[0]
        if keyword is not None and flag(site, keyword) not in (df.MISSING, None):
            continue  # a policy (or one archlint cannot see); `auto_wrap_policy=None` is none
        what = "FullyShardedDataParallel without an auto_wrap_policy" if keyword else "fully_shard only at the root"
        yield Finding(
            "AL413",
            site.node,
            f"{what} makes the whole model one FSDP unit: every parameter is all-gathered at once before "
            "the forward and again before the backward, so the peak holds the model unsharded and no "
            "communication overlaps computation; shard each block "
            + (
                "(auto_wrap_policy=ModuleWrapPolicy({Block}))"
                if keyword
                else "(`for block in model.layers: fully_shard(block)` before `fully_shard(model)`)"
            ),
        )
