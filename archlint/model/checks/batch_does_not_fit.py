"""AL610 batch-does-not-fit: the --train step's peak memory exceeds the budget (--memory-budget, or
a GPU --device-spec's memory); one finding per way that makes it fit, priced in memory saved and
time added. Found by the training step's memory model, not by a check of the graph: the step
(archlint.model.stepped) calls `findings` with archlint.model.train.fit.fit_report's memory (the ways to fit
when the step does not fit), and `price_ways_to_fit` once the device spec's estimate is there.

Each way's figure is the memory model (archlint.model.train.memory.step_memory, on meta) run with
that change applied (activation checkpointing of chosen blocks, a fused optimizer, bitsandbytes'
8-bit state, bf16 autocast's cast policy, a smaller micro-batch with gradient accumulation), under
the same budget, so a way "fits" exactly when its own figure is within the budget.

The time each way to fit (AL610) adds to the step on the device spec, from the estimate itself.

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

import math

import networkx as nx
import torch

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.speedups.fix_timing import FLOOR_SHARE
from archlint.model.train.autocast_meta import BASIS as AUTOCAST_BASIS
from archlint.model.train.eightbit import BASIS as EIGHT_BIT_BASIS
from archlint.model.train.fit import (
    batch_size,
    budget_peak,
    checkpoint_candidates,
    forward_flops,
    with_batch,
    with_checkpoints,
)
from archlint.model.train.memory import step_memory
from archlint.result import Estimate
from archlint.train_names import parse_optimizer
from archlint.units import bytes_against

CODE = "AL610"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("static",)  # memory saved, a share of the step's peak (the time added is said beside it)
FIX = "none"  # no autofix: its page's fix: none
FOUND_BY = "the --train step's memory model"  # not a check of the graph: run_checks leaves it out
OPTIONS: dict = {}


def findings(model, args, kwargs, memory: dict, *, optimizer: str, loss: str, device_spec) -> list[Diagnostic]:
    """AL610's findings for the step's memory as archlint.model.train.fit.fit_report found it: none
    when the step fits, else each way to fit."""
    if memory["fits"]:
        return []
    return ways_to_fit(
        model,
        args,
        kwargs,
        optimizer=optimizer,
        loss=loss,
        budget=memory["budget_bytes"],
        device_spec=device_spec,
        result=memory,
        fit=memory["max_batch_basis"],
    )


def _subtree(per_module: dict[str, int], path: str) -> int:
    return sum(b for m, b in per_module.items() if m == path or m.startswith(path + "."))


def ways_to_fit(
    model, args, kwargs, *, optimizer: str, loss: str, budget: int, device_spec, result: dict, fit: dict
) -> list[Diagnostic]:
    """AL610 findings: the batch does not fit, and each way that makes it fit, priced in memory
    saved (share of the step's peak) and time added. Every way's figure is the memory model run
    with that change applied, under the same budget (`step_memory`'s `needed_bytes` and `fits`),
    never a saving subtracted from the step's figure: a way says "fits" exactly when its own
    figure is within the budget (`fits_after`)."""
    peak, batch = budget_peak(result), batch_size(args, kwargs)
    excess = peak - budget
    where = f"training step at batch {batch} with {optimizer}"
    found = []

    def changed(model_=model, args_=args, kwargs_=kwargs, optimizer_=optimizer, **change) -> dict:
        return step_memory(
            model_,
            args_,
            kwargs_,
            optimizer=optimizer_,
            loss=loss,
            budget_bytes=budget,
            device_spec=device_spec,
            **change,
        )

    def finding(
        way,
        message,
        after,
        alternative,
        *,
        added_flops=None,
        evidence=None,
        basis="measured by the memory model with the change applied",
    ):
        needed = budget_peak(after)
        saved = peak - needed
        price = Price(
            "static",
            saved / peak if peak else 0.0,
            alternative,
            flops_saved=-added_flops if added_flops else None,
            whole="step peak memory",
        )
        ev = {
            "way": way,
            "memory_saved_bytes": int(saved),
            "peak_bytes": peak,
            "budget_bytes": budget,
            "needed_after_bytes": int(needed),
            "fits_after": bool(after["fits"]),
            "saving_basis": basis,
        }
        if added_flops is not None:
            ev["time_added_flops"] = int(added_flops)
        before, limit = bytes_against(peak, budget)
        after_text, limit_after = bytes_against(needed, budget)
        verdict = (
            f"the device then needs {after_text}: fits in {limit_after}"
            if after["fits"]
            else f"the device then needs {after_text}: still over {limit_after}"
        )
        found.append(
            Diagnostic(
                CODE,
                f"{where} needs {before} > budget {limit}: {message} ({verdict})",
                Severity.WARNING,
                evidence=ev | (evidence or {}),
                price=price,
            )
        )

    # 1. Activation checkpointing, blocks chosen by activations saved per recompute FLOP.
    per_module = result.get("per_module_activations", {})
    candidates = checkpoint_candidates(model)
    if candidates:
        flops = forward_flops(model, args, kwargs)
        scored = sorted(
            ((_subtree(per_module, p) / max(flops.get(p, 0), 1), p) for p in candidates if _subtree(per_module, p) > 0),
            reverse=True,
        )
        # Take blocks in order until their kept activations cover the excess; measure; when the
        # measured saving falls short (a block's output is kept by the next one anyway), aim
        # higher by the shortfall's ratio and measure again (at most three rounds).
        chosen: list[str] = []
        after = None
        target: float = excess
        for _ in range(3):
            predicted, more = 0, []
            for _, path in scored:
                if predicted >= target:
                    break
                more.append(path)
                predicted += _subtree(per_module, path)
            if not more or more == chosen:
                break
            after = changed(with_checkpoints(model, more))
            chosen, saved = more, peak - budget_peak(after)
            if after["fits"] or saved <= 0:
                break
            target = predicted * excess / saved
        if chosen and after is not None and peak - budget_peak(after) > 0:
            # reported only when it saves (a peak in the optimizer step is not activations)
            recompute = sum(flops.get(p, 0) for p in chosen)
            finding(
                "checkpoint",
                f"checkpointing {len(chosen)} block(s) costs {recompute / 1e9:.2f} GFLOP of recomputation in backward",
                after,
                f"torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) around {', '.join(chosen[:6])}"
                + (f" and {len(chosen) - 6} more" if len(chosen) > 6 else ""),
                added_flops=recompute,
                evidence={"blocks": chosen},
            )

    # 2. A fused optimizer: no step temporaries; an 8-bit one: its state in uint8. Both measured.
    base, variant = parse_optimizer(optimizer)
    if variant != "fused" and base != "sgd":
        fused = changed(optimizer_=f"{base}-fused")
        if peak - budget_peak(fused) > 0:
            finding(
                "fused-optimizer",
                f"the fused {base} makes no optimizer-step temporaries",
                fused,
                f"torch.optim.{'AdamW' if base == 'adamw' else 'Adam' if base == 'adam' else 'SGD'}(..., fused=True)",
                added_flops=0,
            )
    if base in ("adam", "adamw") and result["optimizer_bytes"]:
        eight = changed(eight_bit=True)
        if peak - budget_peak(eight) > 0:
            finding(
                "8bit-optimizer",
                f"an 8-bit {base} keeps its two moments in 1 byte each instead of 4",
                eight,
                f"bitsandbytes.optim.{'AdamW8bit' if base == 'adamw' else 'Adam8bit'}(model.parameters())",
                added_flops=0,
                basis=f"measured by the memory model with {EIGHT_BIT_BASIS}",
                evidence={
                    "optimizer_bytes": result["optimizer_bytes"],
                    "optimizer_bytes_after": eight["optimizer_bytes"],
                },
            )

    # 3. bf16 autocast: matmul/conv outputs (most saved activations) in 2 bytes instead of 4.
    if result["at_peak"]["activations"] + result["at_peak"]["temporaries"]:
        amp = changed(autocast=torch.bfloat16)
        if peak - budget_peak(amp) > 0:
            finding(
                "autocast",
                "bf16 autocast keeps matmul and conv outputs in 2 bytes",
                amp,
                f"with torch.autocast('{'cuda' if getattr(device_spec, 'kind', '') == 'gpu' else 'cpu'}', "
                "dtype=torch.bfloat16): loss = model(x) ...",
                added_flops=0,
                basis="measured by the memory model with " + AUTOCAST_BASIS.format(dtype="bfloat16"),
            )

    # 4. Gradient accumulation over micro-batches sure to fit.
    micro = fit.get("max_batch")
    if micro and micro < batch:
        steps = math.ceil(batch / micro)
        small_args, small_kwargs = with_batch(args, kwargs, micro)
        small = changed(args_=small_args, kwargs_=small_kwargs)
        finding(
            "accumulation",
            f"{steps} micro-batches of {micro} with gradient accumulation: the same work, in smaller launches",
            small,
            f"for chunk in x.split({micro}): (loss_fn(model(chunk)) / {steps}).backward(); then optimizer.step()",
            added_flops=0,
            evidence={"micro_batch": micro, "accumulation_steps": steps},
        )
    return found


def under(module: str, blocks: list[str]) -> bool:
    return any(module == b or module.startswith(b + ".") for b in blocks)


def recompute_ms(graph: nx.DiGraph, blocks: list[str]) -> float:
    """The estimated forward time of the ops inside `blocks` (what checkpointing runs again)."""
    return sum(
        float(op.get("estimated_ms", 0.0))
        for _, op in graph.nodes(data=True)
        if op.get("kind") not in ("input", "output") and under(str(op.get("module") or ""), blocks)
    )


def kernels_in_step(graph: nx.DiGraph) -> int:
    """Kernels of one forward + backward: each op that moves bytes, and each of its backward terms."""
    count = 0
    for _, op in graph.nodes(data=True):
        if op.get("kind") in ("input", "output") or not int(op.get("mac_bytes", 0)):
            continue
        count += 1 + len([t for t in (op.get("backward_terms") or {}) if t != "recompute"])
    return count


def price_ways_to_fit(
    findings: list[Diagnostic], graph: nx.DiGraph, estimate: Estimate | None, spec
) -> list[Diagnostic]:
    """`findings` (AL610, evidence "way") with the time each adds on `spec` (evidence
    `time_added_ms`, `time_basis`; said in the message) where the estimate gives it; a way under
    the materiality floor lowered to info."""
    for d in findings:
        if d.price is not None and d.price.saving_share < FLOOR_SHARE:
            d.severity = Severity.INFO
            d.evidence["verdict"] = (
                f"saves {d.price.saving_share:.2%} of the step's peak memory, under the {FLOOR_SHARE:.0%} floor"
            )
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
        return launches * spec.overhead_s * 1e3, (
            f"{where}: at least {launches:,} more launches at "
            f"{spec.overhead_s * 1e6:g} µs; smaller kernels may fill the GPU less"
        )
    return None, ""
