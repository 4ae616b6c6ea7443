"""Text report of the per-rank step (--world-size/--strategy): memory per rank and whether it fits,
the collectives, the estimated step with its exposed communication, the fewest GPUs and the plan.

`distributed_rows` reads the result once into typed rows; the text here and the HTML section
(archlint/report/distributed_html.py) both render those rows, so the two never say different things."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console

from archlint.result import ModelResult
from archlint.units import human_bytes as _bytes


@dataclass(frozen=True)
class CollectiveRow:
    op: str
    phase: str
    count: int
    bytes_per_rank: int


@dataclass(frozen=True)
class PlanRow:
    changes: str  # the changes joined with " + "
    figure: str  # "peak" or "the device needs": the figure the budget is held to
    bytes: int
    fits: bool
    adds_ms: float | None
    adds_basis: str


@dataclass
class DistributedRows:
    head: str  # strategy × N (options) · the shard unit's basis
    peak: str  # the peak line: where, what the device needs, fits or not
    states: str  # model states, activations, what is at the peak
    per_rank: list[tuple[str, int]]  # (what, bytes) of one rank
    collectives: list[CollectiveRow]
    volume_bytes: int
    estimate: str | None  # the ESTIMATED line, or what says why there is none
    notes: list[str] = field(default_factory=list)
    fewest: str | None = None  # the fewest GPUs per strategy
    plan_head: str | None = None
    plan: list[PlanRow] = field(default_factory=list)


def distributed_rows(model: ModelResult) -> DistributedRows | None:
    """The section's rows from the result (None: no distributed step)."""
    d, memory = model.distributed, model.memory
    if not d:
        return None
    pr = d["per_rank"]
    extra = [d["mixed_precision"]] if d["mixed_precision"] else []
    extra += ["cpu offload"] if d["cpu_offload"] else []
    nodes = f" over {d['nodes']} nodes" if d["nodes"] > 1 else ""
    head = f"per rank: {d['strategy']} × {d['world_size']}{nodes}" + (f" ({', '.join(extra)})" if extra else "")
    if d.get("shard_unit_basis"):
        head += f" · {d['shard_unit_basis']}"
    line = f"peak {_bytes(pr['peak_bytes'])} in the {pr['at']}"
    figure = pr["peak_bytes"]
    if pr.get("device_peak_bytes"):
        figure = pr["device_peak_bytes"]
        line += f" · the device needs {_bytes(figure)} (allocator segments + CUDA context)"
    if pr.get("fits") is not None:  # "fits" only of a figure within the budget (fits = figure <= budget)
        held = pr.get("budget_figure_bytes") or figure
        if held != figure:
            line += f" · held to the budget: {_bytes(held)} (the allocator limited to it frees its cached segments)"
        line += (
            f" · fits in {_bytes(pr['budget_bytes'])}"
            if pr["fits"]
            else f" · does not fit in {_bytes(pr['budget_bytes'])} ({_bytes(held - pr['budget_bytes'])} over)"
        )
    states = (
        f"model states {_bytes(pr['model_states_bytes'])} (params {_bytes(pr['params_bytes'])}, grads "
        f"{_bytes(pr['grads_bytes'])}, optimizer {_bytes(pr['optimizer_bytes'])}) · activations "
        f"{_bytes(pr['activations_bytes'])} · at the peak: gathered params {_bytes(pr['gathered_params_bytes'])}, "
        f"comm buffers {_bytes(pr['comm_buffers_bytes'])}"
        + (f" · on the host {_bytes(pr['host_bytes'])}" if pr["host_bytes"] else "")
    )
    per_rank = [("peak", pr["peak_bytes"])]
    if pr.get("device_peak_bytes"):
        per_rank.append(("the device needs (allocator segments + CUDA context)", pr["device_peak_bytes"]))
    per_rank += [
        ("parameters", pr["params_bytes"]),
        ("gradients", pr["grads_bytes"]),
        ("optimizer state", pr["optimizer_bytes"]),
        ("activations", pr["activations_bytes"]),
        ("gathered parameters at the peak", pr["gathered_params_bytes"]),
        ("communication buffers at the peak", pr["comm_buffers_bytes"]),
    ]
    if pr["host_bytes"]:
        per_rank.append(("on the host (offloaded)", pr["host_bytes"]))
    if pr.get("budget_bytes") is not None:
        per_rank.append(("budget", pr["budget_bytes"]))
    collectives = [CollectiveRow(c["op"], c["phase"], c["count"], c["bytes_per_rank"]) for c in d["collectives"]]
    est = d.get("estimate")
    estimate = None
    if est and est.get("step_ms") is not None:
        estimate = (
            f"ESTIMATED on {est['device_spec']}: compute {est['compute_ms']:.1f} ms + exposed communication "
            f"{est['exposed_comm_ms']:.1f} ms (of {est['comm_ms']:.1f} ms) = step {est['step_ms']:.1f} ms per "
            f"rank · scaling efficiency {est['scaling_efficiency']:.0%} against one GPU "
            f"({est['single_gpu_step_ms']:.1f} ms)"
        )
        if (est.get("scaling_efficiency") or 0) > 1:  # not a mistake: say why, beside the figure
            estimate += (
                " (over 100%: the sharded optimizer step updates a share of the parameters per rank, "
                "and its time falls by more than communication adds)"
            )
        if est.get("offload_ms") is not None:  # distributed/offload.py: its basis is the estimate's
            estimate += (
                f" · of the compute, CPU offload {est['offload_ms']:.1f} ms (copies over the host link "
                f"{est['offload_copies_ms']:.1f} ms + the optimizer step on the host "
                f"{est['offload_host_step_ms']:.1f} ms, at an assumed host rate; not overlapped)"
            )
    elif est:
        estimate = est["basis"]
    rows = DistributedRows(
        head, line, states, per_rank, collectives, d["comm_bytes_per_rank"], estimate, list(d.get("notes", []))
    )
    sizes = memory.min_world_size if memory is not None else None
    if sizes and memory is not None and memory.budget_bytes is not None:  # with a budget only
        listed = ", ".join(f"{s} {n if n is not None else 'none'}" for s, n in sizes.items())
        rows.fewest = f"fewest GPUs whose per-rank step fits {_bytes(memory.budget_bytes)}: {listed}"
    plan = (memory.fit_plan if memory is not None else None) or []
    if plan:
        rows.plan_head = (
            "plan that fits (each verified by laying the step out with its changes):"
            if any(e["fits"] for e in plan)
            else "no change tried fits; the closest:"
        )
        # the figure a budget is held to: what the device needs on a GPU spec (with the CUDA context), else the peak
        figure = "the device needs" if memory is not None and memory.device_peak_bytes else "peak"
        rows.plan = [
            PlanRow(" + ".join(e["changes"]), figure, e["peak_bytes"], e["fits"], e["adds_ms"], e.get("adds_basis", ""))
            for e in plan
        ]
    return rows


def print_distributed(model: ModelResult, console: Console) -> None:
    rows = distributed_rows(model)
    if rows is None:
        return

    def say(text: str) -> None:
        console.print(text, markup=False)

    say(f"  {rows.head}")
    say(f"    {rows.peak}")
    say(f"    {rows.states}")
    parts = [f"{c.op} {c.phase} ×{c.count} of {_bytes(c.bytes_per_rank)}" for c in rows.collectives]
    shown = parts[:6] + ([f"… {len(parts) - 6} more kinds"] if len(parts) > 6 else [])
    say(
        f"    collectives per step: {'; '.join(shown) or 'none'} · volume {_bytes(rows.volume_bytes)} per rank "
        "(all-reduce counted twice)"
    )
    if rows.estimate:
        say(f"    {rows.estimate}")
    for note in rows.notes:
        say(f"    note: {note}")
    if rows.fewest:
        say(f"  {rows.fewest}")
    if rows.plan_head:
        say(f"  {rows.plan_head}")
        for i, e in enumerate(rows.plan, 1):
            verdict = "fits" if e.fits else "does not fit"
            added = "" if e.adds_ms is None else f" · adds {e.adds_ms:+.1f} ms"
            say(f"    {i}. {e.changes}: {e.figure} {_bytes(e.bytes)} per rank, {verdict}{added}")
