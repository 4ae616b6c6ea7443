"""AL408: an evaluation loop that runs with autograd on (no torch.no_grad / inference_mode)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts, Scope
from archlint.code.names import dotted
from archlint.diagnostics import Severity

CODES = ("AL408",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
# Blocks that set grad mode explicitly; `enable_grad` too: turning autograd on in eval is a choice.
_GRAD_MODE = ("torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled", "torch.enable_grad")


def _grad_context(expr: cst.BaseExpression, facts: Facts, scope: Scope) -> bool:
    func = expr.func if isinstance(expr, cst.Call) else expr
    return facts.qname(func, scope) in _GRAD_MODE


def _decorated(scope: Scope, facts: Facts) -> bool:
    while scope is not None:
        if isinstance(scope.node, cst.FunctionDef) and any(
            _grad_context(d.decorator, facts, scope.parent) for d in scope.node.decorators
        ):
            return True
        scope = scope.parent
    return False


def _called_without_grad(scope: Scope, facts: Facts) -> bool:
    """The function is called somewhere in this file inside a grad-mode block."""
    if not isinstance(scope.node, cst.FunctionDef):
        return False
    name = scope.node.name.value
    for site in facts.calls:
        func = site.node.func
        called = (
            func.value if isinstance(func, cst.Name) else (func.attr.value if isinstance(func, cst.Attribute) else None)
        )
        if called == name and any(_grad_context(w, facts, site.scope) for w in site.withs):
            return True
    return False


def _evaluated(scope: Scope | None) -> set[str]:
    """What `.eval()` is called on in this scope or one enclosing it (`model`, `self.net`)."""
    out = set()
    while scope is not None:
        for site in scope.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "eval" and not site.node.args:
                name = dotted(func.value)
                if name:
                    out.add(name)
        scope = scope.parent
    return out


def _runs_model(loop, models: set[str]) -> bool:
    """The loop calls an object put in eval mode (`model(x)`, `model.generate(...)`): a forward runs
    in it. A loop that only yields or reads batches (a data generator) runs none."""
    for site in loop.calls:
        name = dotted(site.node.func) or ""
        if any(name == m or name.startswith(m + ".") for m in models):
            return True
    return False


def check(facts: Facts):
    if facts.calls_to("torch.set_grad_enabled"):
        return  # grad mode is switched globally somewhere: not visible per loop
    for bl in df.batch_loops(facts):
        loop = bl.loop
        if bl.is_training or not _runs_model(loop, _evaluated(loop.scope)):
            continue
        if any(_grad_context(w, facts, loop.scope) for w in loop.withs):
            continue  # the whole loop is in a no_grad/inference_mode block
        if any(_grad_context(w, facts, site.scope) for site in loop.calls for w in site.withs[len(loop.withs) :]):
            continue  # the forward pass inside the loop is
        if _decorated(loop.scope, facts) or _called_without_grad(loop.scope, facts):
            continue
        yield Finding(
            "AL408",
            loop.node,
            "evaluation loop (after .eval()) runs with autograd on: every forward keeps activations for a "
            "backward that never comes; wrap it in `with torch.inference_mode():` (or torch.no_grad())",
        )
