"""The fewest GPUs per strategy, and a ranked plan of changes that make the step fit.

Every figure here is the per-rank layout of a recorded step (archlint.model.distributed.step)
evaluated with the changes applied: a change that alters what the step computes (activation
checkpointing, bf16 mixed precision, a fused optimizer, a smaller micro-batch with gradient
accumulation) is a new recording of the step with it; one that alters only where the states live
(more ranks, another strategy, CPU offload, an 8-bit optimizer's state) is a new layout of the same
recording. Savings are never added up: each combination is laid out and swept whole, and `fits`
is that sweep's own answer against the budget.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from archlint.model.distributed.step import budget_figure, buffers_of, per_rank, record
from archlint.model.distributed.strategy import PLANNED, Parallel
from archlint.model.distributed.units import Units
from archlint.model.train.fit import (
    batch_size,
    checkpoint_candidates,
    with_batch,
    with_checkpoints,
)
from archlint.model.train.memory import StepRecording
from archlint.train_names import parse_optimizer

MAX_WORLD = 1024  # beyond it the answer is none: the strategy does not shard what fills the rank


@dataclass
class PlanEntry:
    changes: list[str]
    strategy: str
    world_size: int
    peak_bytes: int  # the budget's figure: the device peak on a GPU spec, else the live peak
    fits: bool
    adds_ms: float | None  # time the changes add to a step on the device spec (None: no spec, or unknown)
    adds_basis: str
    micro_batch: int | None = None
    accumulation_steps: int | None = None


@dataclass
class Plan:
    min_world_size: dict[str, int | None]
    min_world_size_basis: str
    fit_plan: list[PlanEntry] = field(default_factory=list)
    evaluated: int = 0  # layouts swept
    recordings: int = 0  # steps recorded


def fits_at(rec: StepRecording, par: Parallel, units: Units, buffers, budget: int) -> tuple[bool, int]:
    pr, _ = per_rank(rec, par, units, buffers, budget)
    return bool(pr.fits), budget_figure(pr)


def min_world_size(
    rec: StepRecording, par: Parallel, units: Units, buffers, budget: int, strategies: tuple[str, ...] = PLANNED
) -> dict[str, int | None]:
    """Per strategy, the fewest ranks whose per-rank step fits the budget (None: none up to
    MAX_WORLD; DDP keeps everything on every rank, so it fits at 1 or never). Ranks double until
    one fits, then bisect; the answer is checked itself (a layout swept at it)."""
    out: dict[str, int | None] = {}
    for strategy in strategies:

        def ok(n: int, strategy: str = strategy) -> bool:
            nodes = par.nodes if strategy == "hsdp" and n % par.nodes == 0 else 1
            if strategy == "hsdp" and nodes == 1:
                return False  # HSDP needs ranks on every node
            return fits_at(rec, par.with_(strategy=strategy, world_size=n, nodes=nodes), units, buffers, budget)[0]

        if strategy == "ddp":
            out[strategy] = 1 if ok(1) else None
            continue
        if strategy == "hsdp" and par.nodes <= 1:
            continue
        step = par.nodes if strategy == "hsdp" else 1
        n = step
        while n <= MAX_WORLD and not ok(n):
            n *= 2
        if n > MAX_WORLD:
            out[strategy] = None
            continue
        lo, hi = n // 2, n  # lo does not fit (or is 0), hi fits
        while hi - lo > step:
            mid = (lo + hi) // 2 // step * step
            if mid <= lo:
                break
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        out[strategy] = hi
    return out


@dataclass
class _Change:
    name: str  # what the plan says
    key: str  # ckpt | bf16 | fused | accum | offload | 8bit | ranks
    adds_ms: float | None
    basis: str


def fit_plan(
    model,
    args,
    kwargs,
    rec: StepRecording,
    par: Parallel,
    units: Units,
    budget: int,
    *,
    optimizer: str,
    loss: str,
    device_spec,
    trainable: str | None,
    step_ms: dict | None,
    limit: int = 8,
) -> Plan:
    """min_world_size per strategy and, when the step as given does not fit, the ranked changes
    that do (module docstring)."""
    buffers = buffers_of(model)
    evaluated = [0]
    recordings: dict[tuple, StepRecording] = {(par.mixed_precision, False, False, None): rec}

    def recording(bf16: bool, ckpt: bool, fused: bool, micro: int | None) -> StepRecording | None:
        key = ("bf16" if bf16 else par.mixed_precision, ckpt, fused, micro)
        if key not in recordings:
            target = with_checkpoints(model, blocks) if ckpt else model
            a, k = with_batch(args, kwargs, micro) if micro else (args, kwargs)
            opt = optimizer
            if fused:
                base, _ = parse_optimizer(optimizer)
                opt = f"{base}-fused"
            recordings[key] = record(
                target,
                a,
                k,
                optimizer=opt,
                loss=loss,
                device_spec=device_spec,
                mixed_precision=key[0],
                trainable=trainable,
            )
        return recordings[key]

    sizes = min_world_size(rec, par, units, buffers, budget)
    plan = Plan(
        sizes,
        "the fewest ranks whose per-rank step (as given: precision, optimizer, batch per rank) "
        "fits the budget, each found by laying the recorded step out at that world size and sweeping it",
    )
    fits_now, _ = fits_at(rec, par, units, buffers, budget)
    if fits_now:
        return plan

    forward_ms = (step_ms or {}).get("forward_ms")
    base, variant = parse_optimizer(optimizer)
    blocks = checkpoint_candidates(model)
    batch = batch_size(args, kwargs)
    changes = []
    if blocks:
        changes.append(
            _Change(
                f"activation checkpointing of {len(blocks)} blocks",
                "ckpt",
                forward_ms,
                "the forward recomputed in the backward (its estimated forward_ms)"
                if forward_ms is not None
                else "no device spec",
            )
        )
    if par.mixed_precision is None:
        auto = (step_ms or {}).get("autocast", {}).get("step_ms")
        changes.append(
            _Change(
                "bf16 mixed precision",
                "bf16",
                None if auto is None or step_ms is None else auto - step_ms["step_ms"],
                "the step estimated under bf16 autocast less in fp32"
                if auto is not None
                else "no estimate of the bf16 step",
            )
        )
    if variant != "fused" and base != "sgd":
        changes.append(_Change(f"fused {base}", "fused", 0.0 if step_ms else None, "no added time (one kernel)"))
    if base in ("adam", "adamw"):
        changes.append(
            _Change(
                f"8-bit {base} (bitsandbytes)",
                "8bit",
                0.0 if step_ms else None,
                "no added time (fused 8-bit kernel); state estimated at 1 byte a moment",
            )
        )
    if not par.cpu_offload and par.strategy != "ddp":
        changes.append(_offload_change(rec, par, units, device_spec, step_ms))
    if batch > 1:
        changes.append(_Change("gradient accumulation", "accum", None, "the same work in more, smaller launches"))

    entries: list[PlanEntry] = []

    def evaluate(combo: tuple[_Change, ...], strategy: str, world: int) -> PlanEntry | None:
        keys = {c.key for c in combo}
        micro = None
        if "accum" in keys:  # the largest power-of-two fraction of the batch that fits, down to 1
            micro = batch
            while micro > 1:
                micro = max(1, micro // 2)
                r = recording("bf16" in keys, "ckpt" in keys, "fused" in keys, micro)
                lay = par.with_(
                    strategy=strategy,
                    world_size=world,
                    cpu_offload=par.cpu_offload or "offload" in keys,
                    optimizer_bits=8 if "8bit" in keys else par.optimizer_bits,
                )
                evaluated[0] += 1
                ok, _ = fits_at(r, lay, units, buffers, budget)
                if ok:
                    break
        r = recording("bf16" in keys, "ckpt" in keys, "fused" in keys, micro)
        lay = par.with_(
            strategy=strategy,
            world_size=world,
            cpu_offload=par.cpu_offload or "offload" in keys,
            optimizer_bits=8 if "8bit" in keys else par.optimizer_bits,
            mixed_precision="bf16" if "bf16" in keys else par.mixed_precision,
        )
        if lay.strategy == "hsdp" and world % max(lay.nodes, 1):
            return None
        evaluated[0] += 1
        ok, peak = fits_at(r, lay, units, buffers, budget)
        names = [
            c.name
            if c.key != "accum"
            else f"gradient accumulation: {math.ceil(batch / micro)} micro-batches of {micro}"
            for c in combo
        ]
        if strategy != par.strategy or world != par.world_size:
            names.insert(
                0,
                f"{strategy} on {world} ranks"
                + (
                    f" (from {par.strategy} on {par.world_size})"
                    if (strategy, world) != (par.strategy, par.world_size)
                    else ""
                ),
            )
        added = [c.adds_ms for c in combo]
        adds = None if step_ms is None or any(a is None for a in added) else sum(added)
        basis = "; ".join(f"{c.name}: {c.basis}" for c in combo) or "no change to the step's work"
        if adds is not None and (strategy, world) != (par.strategy, par.world_size):  # the communication changes
            from archlint.model.distributed.comm import estimate_step

            now = estimate_step(rec, units, par, device_spec, step_ms).get("step_ms")
            then = estimate_step(r, units, lay, device_spec, step_ms).get("step_ms")
            if now is None or then is None:
                adds, basis = None, basis + "; no interconnect figures to time the communication"
            else:
                adds += then - now
                basis += f"; {strategy} on {world} ranks: the step's exposed communication and sharded optimizer step"
        return PlanEntry(
            names, strategy, world, peak, ok, adds, basis, micro, math.ceil(batch / micro) if micro else None
        )

    # 1. more ranks, per strategy (the minimum found above)
    for strategy, n in sizes.items():
        if n is not None and (strategy, n) != (par.strategy, par.world_size):
            e = evaluate((), strategy, n)
            if e is not None:
                entries.append(e)
    # 2. each change alone, then pairs, on the ranks as given (pairs only when no single one fits)
    singles = [evaluate((c,), par.strategy, par.world_size) for c in changes]
    entries += [e for e in singles if e is not None]
    if not any(e.fits for e in singles if e is not None):
        for i in range(len(changes)):
            for j in range(i + 1, len(changes)):
                e = evaluate((changes[i], changes[j]), par.strategy, par.world_size)
                if e is not None:
                    entries.append(e)
    fitting = [e for e in entries if e.fits]
    fitting.sort(
        key=lambda e: (len(e.changes), e.world_size, math.inf if e.adds_ms is None else e.adds_ms, e.peak_bytes)
    )
    plan.fit_plan = fitting[:limit] or sorted(entries, key=lambda e: e.peak_bytes)[:3]
    plan.evaluated, plan.recordings = evaluated[0] + len(sizes), len(recordings)
    return plan


def _offload_change(rec: StepRecording, par: Parallel, units: Units, device_spec, step_ms: dict | None) -> _Change:
    """CPU offload with the time it adds: the offloaded step's estimate less the step's as given
    (archlint.model.distributed.offload: the host link's copies and the host's optimizer step)."""
    name = "CPU offload of the optimizer state"
    if step_ms is None or device_spec is None:
        return _Change(name, "offload", None, "no device spec: not estimated")
    from archlint.model.distributed.comm import estimate_step

    now = estimate_step(rec, units, par, device_spec, step_ms)
    then = estimate_step(rec, units, par.with_(cpu_offload=True), device_spec, step_ms)
    if now.get("step_ms") is None or then.get("offload_ms") is None:
        return _Change(
            name,
            "offload",
            None,
            f"device spec {device_spec.name} gives no interconnect or host-link figures: not estimated",
        )
    return _Change(
        name,
        "offload",
        then["step_ms"] - now["step_ms"],
        f"{then['offload_copies_ms']:.1f} ms of copies over the host link and {then['offload_host_step_ms']:.1f} ms "
        "of optimizer step on the host, in place of the device's (estimated: "
        "archlint.model.distributed.offload)",
    )


def plan_json(plan: Plan) -> tuple[dict, list[dict]]:
    return plan.min_world_size, [asdict(e) for e in plan.fit_plan]
