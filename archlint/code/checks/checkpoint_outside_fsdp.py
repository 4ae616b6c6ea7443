"""AL414: reentrant activation checkpointing wrapped around an FSDP (v1) unit instead of inside it.

`checkpoint_wrapper(FSDP(block), checkpoint_impl=CheckpointImpl.REENTRANT)`, or
`apply_activation_checkpointing` with a reentrant wrapper and a `check_fn` that selects FSDP
units, or `torch.utils.checkpoint.checkpoint(fsdp_unit, ..., use_reentrant=True)`: the recompute
in the backward runs the unit's forward again, which all-gathers its parameters again. Measured on
2 ranks (gloo, torch 2.14), four FSDP units: 12 all-gathers per step with the reentrant checkpoint
outside each unit, 8 with it inside (`FSDP(checkpoint_wrapper(block))`) or with the non-reentrant
checkpoint on either side. FSDP2's `fully_shard` measured 8 either way, so it is not checked."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._distributed import (
    APPLY_CHECKPOINTING,
    CHECKPOINT,
    CHECKPOINT_IMPL,
    CHECKPOINT_WRAPPER,
    FSDP,
)
from archlint.code.facts import CallSite, Facts, Scope, children
from archlint.code.names import dotted
from archlint.diagnostics import Severity

CODES = ("AL414",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
MESSAGE = (
    "reentrant activation checkpointing around an FSDP unit: the recompute in the backward runs "
    "the unit's forward again, which all-gathers its parameters a third time per step; checkpoint "
    "inside the unit (`FSDP(checkpoint_wrapper(block))`, or apply_activation_checkpointing with a "
    "check_fn on the block class) or use the non-reentrant checkpoint"
)


def _value(node: cst.BaseExpression | None, scope: Scope) -> cst.BaseExpression | None:
    """A name bound once in scope → its value; anything else as it is."""
    if isinstance(node, cst.Name):
        found = scope.lookup(node.value)
        if found is not None and len(found.values) == 1 and found.values[0] is not None:
            return found.values[0]
    return node


def _is_fsdp_unit(node, site: CallSite, facts: Facts) -> bool:
    node = _value(node, site.scope)
    return isinstance(node, cst.Call) and facts.qname(node.func, site.scope) in FSDP


def _reentrant_impl(node, site: CallSite, facts: Facts) -> bool:
    node = _value(node, site.scope)
    return isinstance(node, cst.Attribute) and facts.qname(node, site.scope) == f"{CHECKPOINT_IMPL}.REENTRANT"


def _mentions_fsdp(node: cst.CSTNode, site: CallSite, facts: Facts) -> bool:
    if isinstance(node, (cst.Name, cst.Attribute)) and facts.qname(node, site.scope) in FSDP:
        return True
    return any(_mentions_fsdp(child, site, facts) for child in children(node))


def _reentrant_wrapper_fn(node, site: CallSite, facts: Facts) -> bool:
    """`partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)`."""
    node = _value(node, site.scope)
    if not isinstance(node, cst.Call) or (dotted(node.func) or "").rsplit(".", 1)[-1] != "partial" or not node.args:
        return False
    if facts.qname(node.args[0].value, site.scope) not in CHECKPOINT_WRAPPER:
        return False
    return any(
        a.keyword is not None and a.keyword.value == "checkpoint_impl" and _reentrant_impl(a.value, site, facts)
        for a in node.args
    )


def _args(site: CallSite, name: str):
    value = df.argument(site, name)
    return None if value in (df.MISSING, df.UNKNOWN) else value


def check(facts: Facts):
    if not set(FSDP) & set(facts.imports.names.values()):
        return  # FSDP v1 is not in this file
    for site in facts.calls_to(*CHECKPOINT_WRAPPER):
        if (
            site.node.args
            and _is_fsdp_unit(site.node.args[0].value, site, facts)
            and _reentrant_impl(_args(site, "checkpoint_impl"), site, facts)
        ):
            yield Finding("AL414", site.node, MESSAGE)
    for site in facts.calls_to(*APPLY_CHECKPOINTING):
        check_fn, wrapper = _args(site, "check_fn"), _args(site, "checkpoint_wrapper_fn")
        if (
            check_fn is not None
            and _mentions_fsdp(_value(check_fn, site.scope), site, facts)
            and _reentrant_wrapper_fn(wrapper, site, facts)
        ):
            yield Finding("AL414", site.node, MESSAGE)
    for site in facts.calls_to(*CHECKPOINT):
        if (
            site.node.args
            and _is_fsdp_unit(site.node.args[0].value, site, facts)
            and df.literal(_args(site, "use_reentrant")) is True
        ):
            yield Finding("AL414", site.node, MESSAGE)
