"""Text report of one profiler trace: the temporal breakdown, the steps, the top kernels, modules;
and of several ranks of one job read together."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archlint.printable import printable
from archlint.trace.analyze import TraceAnalysis

# A trace of thousands of steps would print a table as long: the text report shows the first and
# last STEPS_SHOWN and the STEPS_SHOWN slowest (by wall time) and says so; JSON keeps every step.
STEPS_SHOWN = 10
STEPS_WHOLE = 3 * STEPS_SHOWN + 10  # up to this many, every step is shown


def _safe(text) -> str:
    """Text from the trace (kernel, module, device and file names) as rich shows it verbatim:
    control characters, lone surrogates and bidi overrides written as escapes, markup escaped."""
    return escape(printable(str(text)))


def shown_steps(steps: list) -> tuple[list[int], str | None]:
    """The indices of the steps the text table lists (in step order) and the note that says
    which, if not all."""
    if len(steps) <= STEPS_WHOLE:
        return list(range(len(steps))), None
    keep = set(range(STEPS_SHOWN)) | set(range(len(steps) - STEPS_SHOWN, len(steps)))
    slowest = sorted(range(len(steps)), key=lambda k: (-steps[k].wall_us, k))[:STEPS_SHOWN]
    keep |= set(slowest)
    note = (
        f"{len(keep)} of {len(steps)} steps shown: the first and last {STEPS_SHOWN} and the {STEPS_SHOWN} slowest "
        "(--output-format json lists every step)"
    )
    return sorted(keep), note


def _ms(us: float | None) -> str:
    return "—" if us is None else f"{us / 1000:.3f}"


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole else "—"


def print_trace(t: TraceAnalysis, console: Console) -> None:
    b = t.temporal_breakdown
    span = b["span_us"]
    rank = "" if t.rank is None else f" rank {t.rank}"
    console.print(
        f"[bold]{_safe(t.file)}[/]{rank} — {_safe(t.device or 'unknown device')}, {t.steps} ProfilerStep ranges"
    )
    console.print(
        f"  temporal breakdown (as HTA): span {_ms(span)} ms = idle {_ms(b['idle_us'])} ({_pct(b['idle_us'], span)}) + "
        f"compute {_ms(b['compute_us'])} ({_pct(b['compute_us'], span)}) + non-compute {_ms(b['non_compute_us'])} "
        f"({_pct(b['non_compute_us'], span)})"
    )
    for note in t.notes:
        console.print(f"  [dim]{_safe(note)}[/]")
    for warning in t.warnings:
        console.print(f"  [yellow]{_safe(warning)}[/]")
    if t.rerecord:
        console.print(f"  [dim]to re-record: {_safe(t.rerecord)}[/]")
    if t.per_step:
        shown, summary = shown_steps(t.per_step)
        table = Table(title="per step (ms)", title_justify="left")
        for col in (
            "step",
            "wall",
            "GPU busy",
            "compute",
            "non-compute",
            "idle",
            "idle: input/sync/queued/launch/host",
            "kernels",
            "DataLoader",
            "sync",
            "launch",
        ):
            table.add_column(col, justify="right")
        for previous, k in zip([-1, *shown], shown):
            if k != previous + 1:
                table.add_row("…", *[""] * 10)  # steps left out here
            s = t.per_step[k]
            c = s.idle_causes
            table.add_row(
                f"{_safe(s.step)}{'' if s.complete else ' (cut)'}{'' if s.steady else ' (not steady)'}",
                _ms(s.wall_us),
                _ms(s.gpu_busy_us),
                _ms(s.compute_us),
                _ms(s.non_compute_us),
                f"{_ms(s.idle_us)} ({_pct(s.idle_us, s.wall_us)})",
                "/".join(_ms(c.get(k, 0.0)) for k in ("input", "sync", "queued", "launch", "host")),
                str(s.kernels),
                _ms(s.dataloader_us),
                _ms(s.sync_us),
                _ms(s.launch_us),
            )
        console.print(table)
        if summary:
            console.print(f"  [dim]{summary}[/]")
    _waterfall(t, console)
    _gaps(t, console)
    if t.groups:
        total = sum(t.groups.values())
        groups = ", ".join(f"{g} {_pct(us, total)}" for g, us in t.groups.items())
        tc = (
            ""
            if t.gemm_tensor_core_share is None
            else f"; GEMM/conv time in tensor-core kernels: {t.gemm_tensor_core_share:.0%}"
        )
        console.print(f"  GPU time by kernel group: {_safe(groups)}{tc}")
    if t.kernels:
        table = Table(title="top kernels", title_justify="left")
        for col in ("kernel", "group", "calls", "total ms", "share"):
            table.add_column(col, justify="left" if col == "kernel" else "right")
        for kernel in t.kernels:
            table.add_row(
                _safe(kernel["name"]),
                kernel["group"],
                str(kernel["count"]),
                _ms(kernel["total_us"]),
                f"{kernel['share']:.1%}",
            )
        console.print(table)
    if t.modules:
        table = Table(title="GPU time per module / annotation (launched inside it)", title_justify="left")
        for col in ("module", "calls", "GPU ms", "self GPU ms"):
            table.add_column(col, justify="left" if col == "module" else "right")
        for m in t.modules[:15]:
            table.add_row(_safe(m["name"][:80]), str(m["calls"]), _ms(m["gpu_us"]), _ms(m["self_gpu_us"]))
        console.print(table)


def _waterfall(t: TraceAnalysis, console: Console) -> None:
    w = t.waterfall
    if not w or not w.windows:
        return
    table = Table(
        title=f"where the step goes, mean of {w.windows} steady window(s) (ms; buckets do not overlap)",
        title_justify="left",
    )
    for col in ("bucket", "ms", "share", "finding", "fix returns", "basis"):
        table.add_column(col, justify="left" if col in ("bucket", "basis", "finding") else "right")
    for b in sorted(w.buckets, key=lambda b: -b.us):
        if b.us <= 0:
            continue
        table.add_row(
            b.name.replace("_", " "),
            _ms(b.us),
            _pct(b.us, w.step_us),
            b.finding or "—",
            _ms(b.returns_us) if b.returns_us else "—",
            escape(b.basis if b.returns_us else ""),
        )
    console.print(table)
    console.print(
        f"  step {_ms(w.step_us)} ms → about {_ms(w.expected_step_us)} ms after the fixes "
        f"(saves {_ms(w.saving_us)} ms, {_pct(w.saving_us, w.step_us)}; estimates, basis per bucket)"
    )


def _gaps(t: TraceAnalysis, console: Console, n: int = 5) -> None:
    gaps = [g for g in t.idle_gaps if g.steady][:n]
    if not gaps:
        return
    table = Table(title="longest GPU idle gaps (trace µs, for Perfetto)", title_justify="left")
    for col in ("start µs", "ms", "cause", "ended by", "launch→start ms", "queue", "host was in"):
        table.add_column(col, justify="left" if col in ("cause", "ended by", "host was in") else "right")
    for g in gaps:
        cause = g.cause + (f" ({g.kind})" if g.kind else "")
        table.add_row(
            f"{g.start_us:.0f}",
            _ms(g.dur_us),
            cause,
            _safe((g.ended_by or "—")[:50]),
            _ms(g.launch_to_start_us),
            str(g.queue_depth),
            _safe(", ".join(g.host)[:60] or "—"),
        )
    console.print(table)


def print_diff(d, console: Console) -> None:
    """`d` is an archlint.trace.diff.TraceDiff."""

    def change(c) -> str:
        return "new" if c is None else f"{c:+.1%}"

    before, after = d.step_us
    console.print(f"[bold]{_safe(d.new)}[/] against [bold]{_safe(d.base)}[/]")
    console.print(f"  step {_ms(before)} → {_ms(after)} ms ({change((after - before) / before if before else None)})")
    for key, (b, a) in d.breakdown.items():
        console.print(f"  {key.removesuffix('_us').replace('_', '-')} per step {_ms(b)} → {_ms(a)} ms")
    for title, rows in (("GPU time per step by kernel group", d.groups), ("GPU time per step by module", d.modules)):
        if not rows:
            continue
        table = Table(title=title + " (slowest change first)", title_justify="left")
        for col in ("name", "base ms", "new ms", "Δ ms", "change"):
            table.add_column(col, justify="left" if col == "name" else "right")
        for r in rows:
            table.add_row(
                _safe(r["name"][:80]),
                _ms(r["base_us"]),
                _ms(r["new_us"]),
                f"{r['delta_us'] / 1000:+.3f}",
                change(r["change"]),
            )
        console.print(table)


def print_ranks(r, console: Console) -> None:
    """Several ranks of one job read together (archlint.trace.ranks.CrossRank): step time per rank,
    each collective's wait for peers against transfer, and the rank the others wait for."""
    console.print(
        f"[bold]Across ranks[/] — {len(r.ranks)} of {r.world_size} ranks, {len(r.steps)} steps matched "
        f"(complete and steady on every rank); step spread {_ms(r.step_spread_us)} ms"
    )
    for note in r.notes:
        console.print(f"  [dim]{_safe(note)}[/]")
    table = Table(title="per rank, ms per step (wait: in collectives, for peers)", show_edge=False)
    for col in ("rank", "step", f"{r.compute_on} compute", "collectives", "wait", "transfer", "last to arrive"):
        table.add_column(col, justify="left" if col == "rank" else "right")
    for f in r.per_rank:
        table.add_row(
            str(f.rank),
            _ms(f.step_us),
            _ms(f.compute_us),
            _ms(f.comm_us),
            _ms(f.wait_us),
            _ms(f.comm_us - f.wait_us),
            str(f.last_arrivals),
        )
    console.print(table)
    worst = max(r.per_step, key=lambda s: (s.over_median_us, str(s.step)), default=None)
    if worst is not None and worst.over_median_us > 0:
        console.print(
            f"  slowest step over the median: step {_safe(worst.step)}, rank {worst.slowest_rank} "
            f"{_ms(worst.over_median_us)} ms over the ranks' median {_ms(worst.median_us)} ms"
        )
    for c in r.collectives[:5]:
        waits = ", ".join(f"rank {k} {_ms(v)}" for k, v in c.wait_us.items())
        console.print(
            f"  {_safe(c.name)} ×{c.calls_per_step:g}/step: transfer {_ms(c.transfer_us)} ms; wait {waits} ms"
        )
    s = r.straggler
    if s is not None and s.caused_wait_us > 0:
        console.print(
            f"  [yellow]rank {s.rank} holds the others back[/]: last to arrive at {s.last_arrivals} of {s.calls} "
            f"collective calls; the others wait at least {_ms(s.caused_wait_us)} ms per step for it"
        )
    else:
        console.print("  no rank holds the others back (no rank alone arrives last with a wait)")
