"""The HTML section of one measured data pipeline: summary, stages, workers, verdict (static
HTML: it reads without JavaScript)."""

from __future__ import annotations

import html

from archlint.report.loader_table import prefetching
from archlint.units import human_bytes, significant


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _bar(share: float) -> str:
    width = max(0.0, min(1.0, share)) * 100
    return (
        f"<span style='display:inline-block;height:.7em;width:{width:.1f}%;max-width:12em;background:#4e79a7'></span>"
    )


def loader_section(i: int, lr) -> str:
    """`lr` is an archlint.loader.result.LoaderResult."""
    rows = [
        ("loader", f"<code>{_e(lr.target)}</code>"),
        (
            "batch_size · num_workers",
            f"{_e(lr.batch_size)} · {lr.num_workers}" + (" · pin_memory" if lr.pin_memory else ""),
        ),
        (
            "throughput",
            f"<b>{lr.samples_per_s:,.1f} samples/s</b> ({lr.batches_per_s:,.2f} batches/s over {lr.batches} batches)",
        ),
        (
            "between batches",
            f"{significant(lr.spread[0])}–{significant(lr.spread[1])} ms <span class=muted>q1–q3</span>",
        ),
        ("first batch", f"{significant(lr.first_batch_s)} s <span class=muted>worker start-up included</span>"),
        ("prefetching", _e(prefetching(lr))),
    ]
    if lr.files_per_sample is not None:
        rows.append(("files · bytes per sample", f"{lr.files_per_sample:.2f} · {_e(human_bytes(lr.bytes_per_sample))}"))
    summary = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    stages = "".join(
        f"<tr><td>{_e(s.name)}</td><td class=num>{s.ms_per_sample:.3f}</td><td class=num>{s.share:.1%}</td><td>{_bar(s.share)}</td></tr>"
        for s in lr.stages
    )
    if stages:
        stages = (
            f"<h3>One sample's time by stage <span class=muted>(main process, {lr.stage_items} items)</span></h3>"
            "<table class=layers><tr><th>stage</th><th>ms/sample</th><th>share</th><th></th></tr>"
            f"{stages}<tr><th>sum</th><th class=num>{lr.stage_sum_ms:.3f}</th><th></th><th></th></tr></table>"
        )
    base = next((r.samples_per_s for r in lr.workers if r.num_workers == 0), None)
    workers = "".join(
        f"<tr><td class=num>{r.num_workers}</td><td class=num>{r.samples_per_s:,.1f}</td>"
        f"<td class=num>{(r.samples_per_s / base) if base else float('nan'):.2f}</td>"
        f"<td class=num>{significant(r.first_batch_s)}</td><td class=num>{r.batches}</td></tr>"
        for r in lr.workers
    )
    if workers:
        workers = (
            "<h3>Scaling with num_workers</h3><table class=layers><tr><th>num_workers</th><th>samples/s</th>"
            f"<th>× vs 0</th><th>first batch s</th><th>batches</th></tr>{workers}</table>"
        )
    verdict = ""
    v = lr.verdict
    if v is not None:
        cls = "bad" if v.bound == "input" else "good"
        verdict = (
            f"<h3>Verdict</h3><p class='chip {cls}'>{_e(v.bound)}-bound {v.factor:.1f}×</p><p>{_e(v.message)}</p>"
            f"<p class=muted>model {_e(v.model)}: {_e(v.step)} step {significant(v.model_step_ms)} ms at batch {v.model_batch} "
            f"on {_e(v.device)} ({_e(v.basis)})</p>"
        )
    notes = "".join(f"<li>{_e(n)}</li>" for n in (lr.notes + (v.notes if v else [])))
    return f"""
<section class=loader id="loader-{i}">
<h2>Data pipeline: {_e(lr.target)}</h2>
<table class=summary>{summary}</table>
{verdict}{stages}{workers}
{f"<h4>Notes</h4><ul class=notes>{notes}</ul>" if notes else ""}
</section>"""
