"""Text report of one measured data pipeline: throughput, stages of a sample, the workers table,
the input-bound verdict (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archlint.units import human_bytes, significant


def prefetching(lr) -> str:
    """What prepares batches ahead, in words (shared with the HTML report)."""
    p = lr.prefetch
    if p is None:
        return "none (num_workers=0 and no prefetcher: each batch is made when the step asks for it)"
    return f"{p.kind}: {p.detail}"


def print_loader(lr, console: Console) -> None:
    """`lr` is an archlint.loader.result.LoaderResult."""
    console.print(f"[bold]{escape(lr.target)}[/]", markup=True)
    pin = " · pin_memory" if lr.pin_memory else ""
    console.print(
        f"  batch_size {lr.batch_size} · num_workers {lr.num_workers}{pin}: "
        f"[bold]{lr.samples_per_s:,.1f} samples/s[/] ({lr.batches_per_s:,.2f} batches/s over {lr.batches} batches; "
        f"{significant(lr.spread[0])}–{significant(lr.spread[1])} ms between batches, q1–q3); first batch after {significant(lr.first_batch_s)} s",
        markup=True,
    )
    console.print(f"  prefetching: {escape(prefetching(lr))}", markup=True)
    if lr.stages:
        table = Table(title=f"one sample's time by stage (main process, {lr.stage_items} items)", title_justify="left")
        for column, justify in (("stage", "left"), ("ms/sample", "right"), ("share", "right")):
            table.add_column(column, justify=justify)
        for s in lr.stages:
            table.add_row(escape(s.name), f"{s.ms_per_sample:.3f}", f"{s.share:.1%}")
        table.add_row("[bold]sum[/]", f"[bold]{lr.stage_sum_ms:.3f}[/]", "")
        console.print(table)
        at0 = next((r for r in lr.workers if r.num_workers == 0), None)
        at0_sps = at0.samples_per_s if at0 else (lr.samples_per_s if lr.num_workers == 0 else None)
        tail = f"; the loader at num_workers=0 takes {1e3 / at0_sps:.3f} ms/sample" if at0_sps else ""
        console.print(
            f"  files opened {lr.files_per_sample:.2f}/sample · bytes read {human_bytes(lr.bytes_per_sample)}/sample{tail}"
        )
    if lr.workers:
        table = Table(title="scaling with num_workers", title_justify="left")
        for column in ("num_workers", "samples/s", "× vs 0", "first batch s", "batches"):
            table.add_column(column, justify="right")
        base = next((r.samples_per_s for r in lr.workers if r.num_workers == 0), None)
        best = max(lr.workers, key=lambda r: r.samples_per_s)
        for r in lr.workers:
            mark = " ◀ best" if r is best and len(lr.workers) > 1 else ""
            ratio = f"{r.samples_per_s / base:.2f}" if base else "—"
            table.add_row(
                str(r.num_workers),
                f"{r.samples_per_s:,.1f}{mark}",
                ratio,
                f"{significant(r.first_batch_s)}",
                str(r.batches),
            )
        console.print(table)
    v = lr.verdict
    if v is not None:
        color = "red" if v.bound == "input" else "green"
        console.print(f"[bold {color}]verdict[/] {escape(v.message)}", markup=True)
        console.print(
            f"  model {escape(v.model)}: {v.step} step {significant(v.model_step_ms)} ms at batch {v.model_batch} on {v.device} ({v.basis})"
        )
        for note in v.notes:
            console.print(f"  [dim]note: {escape(note)}[/]", markup=True)
    for note in lr.notes:
        console.print(f"  [dim]note: {escape(note)}[/]", markup=True)
    console.print(
        "  [dim]timings on a shared machine are noisy: rerun before acting on small differences[/]", markup=True
    )
