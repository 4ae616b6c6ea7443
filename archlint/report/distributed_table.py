"""Text report of the per-rank step (--world-size/--strategy): memory per rank and whether it fits,
the collectives, the estimated step with its exposed communication, the fewest GPUs and the plan."""

from __future__ import annotations

from rich.console import Console

from archlint.result import ModelResult
from archlint.units import human_bytes as _bytes


def print_distributed(model: ModelResult, console: Console) -> None:
    d, memory = model.distributed, model.memory
    if not d:
        return
    pr = d["per_rank"]
    extra = [d["mixed_precision"]] if d["mixed_precision"] else []
    extra += ["cpu offload"] if d["cpu_offload"] else []
    nodes = f" over {d['nodes']} nodes" if d["nodes"] > 1 else ""
    head = f"  per rank: {d['strategy']} × {d['world_size']}{nodes}" + (f" ({', '.join(extra)})" if extra else "")
    if d.get("shard_unit_basis"):
        head += f" · {d['shard_unit_basis']}"
    say = console.print
    say(head, markup=False)
    line = f"    peak {_bytes(pr['peak_bytes'])} in the {pr['at']}"
    figure = pr["peak_bytes"]
    if pr.get("device_peak_bytes"):
        figure = pr["device_peak_bytes"]
        line += f" · the device needs {_bytes(figure)} (allocator segments + CUDA context)"
    if pr.get("fits") is not None:  # "fits" only of a figure within the budget (fits = figure <= budget)
        held = pr.get("budget_figure_bytes") or figure
        if held != figure:
            line += f" · held to the budget: {_bytes(held)} (the allocator limited to it frees its cached segments)"
        line += (f" · fits in {_bytes(pr['budget_bytes'])}" if pr["fits"] else
                 f" · does not fit in {_bytes(pr['budget_bytes'])} ({_bytes(held - pr['budget_bytes'])} over)")
    say(line, markup=False)
    say(f"    model states {_bytes(pr['model_states_bytes'])} (params {_bytes(pr['params_bytes'])}, grads "
        f"{_bytes(pr['grads_bytes'])}, optimizer {_bytes(pr['optimizer_bytes'])}) · activations "
        f"{_bytes(pr['activations_bytes'])} · at the peak: gathered params {_bytes(pr['gathered_params_bytes'])}, "
        f"comm buffers {_bytes(pr['comm_buffers_bytes'])}" + (f" · on the host {_bytes(pr['host_bytes'])}"
                                                               if pr["host_bytes"] else ""), markup=False)
    parts = [f"{c['op']} {c['phase']} ×{c['count']} of {_bytes(c['bytes_per_rank'])}" for c in d["collectives"]]
    shown = parts[:6] + ([f"… {len(parts) - 6} more kinds"] if len(parts) > 6 else [])
    say(f"    collectives per step: {'; '.join(shown) or 'none'} · volume {_bytes(d['comm_bytes_per_rank'])} per rank "
        "(all-reduce counted twice)", markup=False)
    est = d.get("estimate")
    if est and est.get("step_ms") is not None:
        say(f"    ESTIMATED on {est['device_spec']}: compute {est['compute_ms']:.1f} ms + exposed communication "
            f"{est['exposed_comm_ms']:.1f} ms (of {est['comm_ms']:.1f} ms) = step {est['step_ms']:.1f} ms per rank · "
            f"scaling efficiency {est['scaling_efficiency']:.0%} against one GPU ({est['single_gpu_step_ms']:.1f} ms)",
            markup=False)
    elif est:
        say(f"    {est['basis']}", markup=False)
    for note in d.get("notes", []):
        say(f"    note: {note}", markup=False)
    sizes = memory.min_world_size if memory is not None else None
    if sizes:
        listed = ", ".join(f"{s} {n if n is not None else 'none'}" for s, n in sizes.items())
        say(f"  fewest GPUs whose per-rank step fits {_bytes(memory.budget_bytes)}: {listed}", markup=False)
    plan = (memory.fit_plan if memory is not None else None) or []
    if plan:
        fitting = any(e["fits"] for e in plan)
        say("  plan that fits (each verified by laying the step out with its changes):" if fitting else
            "  no change tried fits; the closest:", markup=False)
        # the figure a budget is held to: what the device needs on a GPU spec (with the CUDA context), else the peak
        figure = "the device needs" if memory.device_peak_bytes else "peak"
        for i, e in enumerate(plan, 1):
            verdict = "fits" if e["fits"] else "does not fit"
            added = "" if e["adds_ms"] is None else f" · adds {e['adds_ms']:+.1f} ms"
            say(f"    {i}. {' + '.join(e['changes'])}: {figure} {_bytes(e['peak_bytes'])} per rank, {verdict}{added}",
                markup=False)
