"""AL420: torch.cuda.empty_cache() on every iteration of a batch or training loop, or in a step
function (one that runs backward outside any loop of its own: `def train_step(self, batch)`)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL420",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"

_EMPTY_CACHE = ("torch.cuda.empty_cache", "torch.cuda.memory.empty_cache")
MESSAGE = (
    "torch.cuda.empty_cache() on every step hands the caching allocator's free blocks back to the "
    "driver, so the next step allocates them again with cudaMalloc (synchronous, and cudaFree waits for "
    "the GPU): remove it from the loop (the cache is reused by PyTorch, not lost), or call it under an if "
    "between phases; against fragmentation set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
)


def check(facts: Facts):
    calls = facts.calls_to(*_EMPTY_CACHE)
    if not calls:
        return
    loops = {id(bl.loop): bl.loop for bl in df.batch_loops(facts) + df.step_loops(facts)}
    for site in calls:
        # the innermost batch or training loop around the call decides: every iteration, or not
        where = next(
            (
                df.in_loop(site, loop)
                for enclosing, _ in reversed(site.loops)
                if (loop := loops.get(id(enclosing))) is not None
            ),
            None,
        )
        if where is not None and not where[1]:
            yield Finding("AL420", site.node, MESSAGE)
        elif where is None and _step_function(site, facts):
            yield Finding("AL420", site.node, MESSAGE)  # a step function: it runs once per step


def _step_function(site, facts: Facts) -> bool:
    """The call is in the body of a function that runs backward with no loop of its own (a
    `train_step(batch)` its caller runs once per step), not under a conditional."""
    scope = site.scope
    return (
        isinstance(scope.node, cst.FunctionDef)
        and scope.has_backward
        and not site.loops
        and not site.conditional
        and not any(loop.scope is scope for loop in facts.loops)
    )
