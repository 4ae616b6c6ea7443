"""AL409: gradient accumulation under DistributedDataParallel without no_sync().

Two shapes of accumulation: a batch loop whose optimizer step runs under an `if` (every
iteration's backward all-reduces), and a micro-batch loop with a backward on each iteration and
the step after it (`for micro in range(accum): ...backward()` then `optimizer.step()`). A file that
uses `no_sync` or sets `require_backward_grad_sync` (nanoGPT's way) is left alone: AL411 checks
that its no_sync() encloses the forward."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._distributed import DDP
from archlint.code.facts import Facts, is_backward_call
from archlint.code.names import dotted
from archlint.diagnostics import Severity

CODES = ("AL409",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
MESSAGE = (
    "gradient accumulation under DistributedDataParallel all-reduces gradients on every "
    "backward: run the micro-batches that do not step inside `with model.no_sync():` (the forward "
    "too), so only the last one all-reduces"
)


def _is_step(site) -> bool:
    """`optimizer.step()` or `scaler.step(optimizer)`."""
    func = site.node.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step":
        return False
    owner = (dotted(func.value) or "").rsplit(".", 1)[-1].lower()
    return "optim" in owner or "scaler" in owner or owner in ("opt", "optimizer")


def _count(node: cst.BaseExpression | None, scope) -> int | None:
    """An int literal above 1, or a name bound once to one; else None (a config's value is not seen)."""
    if isinstance(node, cst.Name):
        found = scope.lookup(node.value)
        node = found.values[0] if found is not None and len(found.values) == 1 else None
    value = df.literal(node) if node is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else None


def _modulus(site) -> int | None:
    """`if (i + 1) % ACCUM == 0: optimizer.step()` → ACCUM, when the file binds it to an int."""
    for node, _ in reversed(site.under):
        test = getattr(node, "test", None)
        if (
            isinstance(test, cst.Comparison)
            and isinstance(test.left, cst.BinaryOperation)
            and isinstance(test.left.operator, cst.Modulo)
        ):
            return _count(test.left.right, site.scope)
    return None


def _message(accum: int | None) -> str:
    """The message, with the waste when the number of micro-batches per step is a literal."""
    if accum is None:
        return MESSAGE
    return MESSAGE + f" ({accum} micro-batches per step: {accum - 1} of every {accum} all-reduces are wasted)"


def _controls_sync(facts: Facts) -> bool:
    return "no_sync" in facts.idents or any(
        target.attr.value == "require_backward_grad_sync" for target, _ in facts.attr_assigns
    )


def check(facts: Facts):
    if _controls_sync(facts) or not facts.calls_to(DDP):
        return
    flagged: set[int] = set()
    for bl in df.batch_loops(facts):
        if not bl.is_training:
            continue
        step_sites = [s for s in bl.loop.calls if _is_step(s)]
        steps = [df.in_loop(s, bl.loop) for s in step_sites]
        if not steps or any(not conditional for _, conditional in steps):
            continue  # no optimizer step here, or one on every iteration: no accumulation
        for site in bl.loop.calls:
            func = site.node.func
            where = df.in_loop(site, bl.loop)
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and where and not where.conditional:
                flagged.add(id(site))
                yield Finding("AL409", site.node, _message(_modulus(step_sites[0])))
                break
    yield from _micro_batch_loops(facts, flagged)


def _micro_batch_loops(facts: Facts, flagged: set[int]):
    """A loop that runs a backward on every iteration and never steps, in a function that steps
    after it: each micro-batch's backward all-reduces."""
    for loop in facts.loops:
        if not loop.has_backward or any(_is_step(s) for s in loop.calls):
            continue
        backward = next(
            (
                s
                for s in loop.calls
                if is_backward_call(s.node)
                and id(s) not in flagged
                and (w := df.in_loop(s, loop))
                and not w.conditional
                and s.loops[-1].loop is loop
            ),
            None,
        )
        if backward is None:
            continue
        calls = loop.scope.calls
        last = max(i for i, s in enumerate(calls) if any(inner is loop for inner, _ in s.loops))
        parents = [outer for outer, _ in backward.loops[:-1]]  # the step runs in the loops around this one
        if any(_is_step(s) and [outer for outer, _ in s.loops] == parents for s in calls[last + 1 :]):
            flagged.add(id(backward))
            it = loop.iter
            accum = None
            if isinstance(it, cst.Call) and dotted(it.func) == "range" and len(it.args) == 1:
                accum = _count(it.args[0].value, loop.scope)
            yield Finding("AL409", backward.node, _message(accum))
