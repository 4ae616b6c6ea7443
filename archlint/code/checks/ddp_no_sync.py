"""AL409: gradient accumulation under DistributedDataParallel without no_sync()."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.code.names import dotted

CODES = ("AL409",)
DDP = "torch.nn.parallel.DistributedDataParallel"


def _is_step(site) -> bool:
    """`optimizer.step()` or `scaler.step(optimizer)`."""
    func = site.node.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step":
        return False
    owner = (dotted(func.value) or "").rsplit(".", 1)[-1].lower()
    return "optim" in owner or "scaler" in owner or owner in ("opt", "optimizer")


def check(facts: Facts):
    if "no_sync" in facts.idents or not facts.calls_to(DDP):
        return
    for bl in df.batch_loops(facts):
        if not bl.is_training:
            continue
        steps = [df.in_loop(s, bl.loop) for s in bl.loop.calls if _is_step(s)]
        if not steps or any(not conditional for _, conditional in steps):
            continue  # no optimizer step here, or one on every iteration: no accumulation
        for site in bl.loop.calls:
            func = site.node.func
            where = df.in_loop(site, bl.loop)
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and where and not where[1]:
                yield Finding(
                    "AL409",
                    site.node,
                    "gradient accumulation under DistributedDataParallel all-reduces gradients on every "
                    "backward: run the micro-batches that do not step inside `with model.no_sync():`",
                )
                break
