"""The time each way to fit (AL610) adds to the step on the device spec, from the estimate itself.

The memory model prices a way to fit in memory saved; on a device spec the step's estimate
(archlint.model.estimating.estimate, .train.steptime) prices its time, each op by the same per-op function:

    checkpointing      the chosen blocks' forward runs again inside backward: + the estimated
                       forward time of their ops;
    bf16 autocast      the step under torch.autocast against the step as captured
                       (estimate.train.autocast): usually time saved, not added;
    accumulation       the same multiply-adds in k micro-steps: at least every kernel launched k
                       times instead of once, (k − 1) × kernels × the spec's launch overhead;
                       smaller kernels may also fill the GPU less (not counted: said).

A way whose memory saving is under the materiality floor (the share of the step's peak every
model rule's `min_saving_share` defaults to) does not pay: info, with evidence["verdict"] saying why.
"""

from __future__ import annotations

import networkx as nx

from archlint.diagnostics import Diagnostic, Severity
from archlint.model.speedups.fix_timing import FLOOR_SHARE
from archlint.result import Estimate


def under(module: str, blocks: list[str]) -> bool:
    return any(module == b or module.startswith(b + ".") for b in blocks)


def recompute_ms(graph: nx.DiGraph, blocks: list[str]) -> float:
    """The estimated forward time of the ops inside `blocks` (what checkpointing runs again)."""
    return sum(float(op.get("estimated_ms", 0.0)) for _, op in graph.nodes(data=True)
               if op.get("kind") not in ("input", "output") and under(str(op.get("module") or ""), blocks))


def kernels_in_step(graph: nx.DiGraph) -> int:
    """Kernels of one forward + backward: each op that moves bytes, and each of its backward terms."""
    count = 0
    for _, op in graph.nodes(data=True):
        if op.get("kind") in ("input", "output") or not int(op.get("mac_bytes", 0)):
            continue
        count += 1 + len([t for t in (op.get("backward_terms") or {}) if t != "recompute"])
    return count


def price_ways_to_fit(findings: list[Diagnostic], graph: nx.DiGraph, estimate: Estimate | None,
                      spec) -> list[Diagnostic]:
    """`findings` (AL610, evidence "way") with the time each adds on `spec` (evidence
    `time_added_ms`, `time_basis`; said in the message) where the estimate gives it; a way under
    the materiality floor lowered to info."""
    for d in findings:
        if d.price is not None and d.price.saving_share < FLOOR_SHARE:
            d.severity = Severity.INFO
            d.evidence["verdict"] = (f"saves {d.price.saving_share:.2%} of the step's peak memory, "
                                     f"under the {FLOOR_SHARE:.0%} floor")
        if estimate and spec is not None:
            added, basis = _time_added(d, graph, estimate, spec)
            if added is not None:
                d.evidence.update(time_added_ms=added, time_basis=basis)
                verb = f"adds ≈ {added:.2f} ms" if added >= 0 else f"saves ≈ {-added:.2f} ms"
                d.message += f"; {verb} a step ({basis})"
    return findings


def _time_added(d: Diagnostic, graph: nx.DiGraph, estimate: Estimate, spec) -> tuple[float | None, str]:
    ev, where = d.evidence, f"estimated on {spec.name}"
    way = ev.get("way")
    if way == "checkpoint":
        return recompute_ms(graph, list(ev["blocks"])), f"{where}: the blocks' forward run again"
    if way == "autocast":
        train = estimate.train or {}
        step, amp = train.get("step_ms"), (train.get("autocast") or {}).get("step_ms")
        if step is not None and amp is not None:
            return float(amp) - float(step), f"{where}: the step under torch.autocast against the step as captured"
    if way == "accumulation":
        launches = (int(ev["accumulation_steps"]) - 1) * kernels_in_step(graph)
        return launches * spec.overhead_s * 1e3, (f"{where}: at least {launches:,} more launches at "
                                                  f"{spec.overhead_s * 1e6:g} µs; smaller kernels may fill the GPU less")
    return None, ""
