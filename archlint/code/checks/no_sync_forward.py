"""AL411: `with model.no_sync():` around the backward only, the forward outside it.

DDP decides at the end of each forward whether the coming backward all-reduces (its reducer is
armed by `prepare_for_backward` only while `require_backward_grad_sync` is set), so a `no_sync()`
entered after the forward changes nothing: the backward inside it still all-reduces every bucket.
Measured on 2 ranks (gloo): 3 micro-batches under `no_sync()` plus one that syncs ran 4 bucket
all-reduces with the forward outside the `with`, 1 with it inside. FSDP (v1 `no_sync()`, FSDP2
`set_requires_gradient_sync(False)`) reads its flag in the backward: the same test ran no
reduce-scatter with the switch around the backward only. So only files that build or import DDP,
and nothing of FSDP, are checked."""

from __future__ import annotations

import libcst as cst

from archlint.code.checks import Finding
from archlint.code.checks._distributed import DDP
from archlint.code.facts import CallSite, Facts, is_backward_call
from archlint.code.names import CANONICAL, dotted
from archlint.diagnostics import Severity

CODES = ("AL411",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"


def _receiver(site: CallSite) -> str | None:
    """`model.no_sync()` → "model"; `accelerator.no_sync(model)` → "model"."""
    func = site.node.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "no_sync":
        return None
    if site.node.args:  # accelerate: the model is the argument
        return dotted(site.node.args[0].value)
    return dotted(func.value)


def _holds(item: cst.BaseExpression, call: cst.Call) -> bool:
    """The `with` item is the call, or a conditional expression choosing it (`nullcontext() if last
    else model.no_sync()`)."""
    if item is call:
        return True
    return isinstance(item, cst.IfExp) and (item.body is call or item.orelse is call)


def _uses(site: CallSite, name: str) -> bool:
    """The call runs the model: `model(x)`, `model.module(x)`, or hands it to a helper (`loss_fn(model, batch)`)."""
    func = dotted(site.node.func) or ""
    if func == name or (func.startswith(name + ".") and not func.endswith(".no_sync")):
        return True
    return any(dotted(arg.value) == name for arg in site.node.args)


def _runs(site: CallSite, name: str) -> bool:
    """A forward of the model: `model(x)`, `model.module(x)`, `model.forward(x)`, or a helper it is
    handed to (`loss = forward_step(x, y, model)`); not its other methods (`model.train()`)."""
    func = dotted(site.node.func) or ""
    if func in (name, f"{name}.module", f"{name}.forward"):
        return True
    return not func.startswith(name + ".") and any(dotted(arg.value) == name for arg in site.node.args)


def _ddp_file(facts: Facts) -> bool:
    """The file builds or imports DDP and nothing of FSDP: FSDP (v1 and 2) honours a gradient-sync
    switch entered after the forward (measured), and accelerate's backend is set outside the code."""
    if not facts.calls_to(DDP) and DDP not in {CANONICAL.get(n, n) for n in facts.imports.names.values()}:
        return False
    return not facts.imports.uses("torch.distributed.fsdp") and not facts.imports.uses("torch.distributed._composable")


def check(facts: Facts):
    if "no_sync" not in facts.idents or not _ddp_file(facts):
        return
    for site in facts.calls:
        name = _receiver(site)
        if name is None:
            continue
        calls = site.scope.calls
        # the with's own item is recorded inside it too: not a call of its block
        inside = [s for s in calls if s is not site and any(_holds(w, site.node) for w in s.withs)]
        if not any(is_backward_call(s.node) for s in inside) or any(_uses(s, name) for s in inside):
            continue
        index = next(i for i, s in enumerate(calls) if s is site)
        loops = [loop for loop, _ in site.loops]
        before = [
            s
            for s in calls[:index]
            if s not in inside and _runs(s, name) and [loop for loop, _ in s.loops[: len(loops)]] == loops
        ]
        if not before:
            continue  # no forward seen before it (in its loop): it may run elsewhere, under the with
        line = facts.position(before[-1].node).start.line
        yield Finding(
            "AL411",
            site.node,
            f"`no_sync()` here wraps the backward but not the forward (line {line}): DDP decides whether a "
            "backward all-reduces when the forward runs, so this backward still all-reduces every gradient "
            "bucket; move the forward inside the `with`",
        )
