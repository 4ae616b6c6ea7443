"""The HTML section of one profiler trace: the temporal breakdown, a step timeline (one stacked bar
per step: compute, non-compute, idle), the top kernels and the trace's findings (static HTML: it
reads without JavaScript)."""

from __future__ import annotations

import html

from archlint.report.wording import price_text

COLORS = {"compute": "#4e79a7", "non-compute": "#f28e2b", "idle": "#bab0ac"}


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _stack(parts: list[tuple[str, float]], total: float, scale: float) -> str:
    """One horizontal bar, `total` long on a scale where `scale` fills the row."""
    spans = "".join(
        f"<span title='{_e(name)} {us / 1000:.3f} ms ({us / total:.1%})' style='display:inline-block;height:1em;"
        f"width:{100 * us / scale:.3f}%;background:{COLORS[name]}'></span>"
        for name, us in parts
        if us > 0 and total > 0
    )
    return f"<div style='white-space:nowrap;width:100%'>{spans}</div>"


def trace_section(i: int, t, diagnostics) -> str:
    """`t` is an archlint.trace.analyze.TraceAnalysis; `diagnostics` its findings."""
    b = t.temporal_breakdown
    span = b["span_us"] or 1.0
    legend = " ".join(f"<span style='color:{c}'>■</span> {_e(n)}" for n, c in COLORS.items())
    overall = _stack(
        [("compute", b["compute_us"]), ("non-compute", b["non_compute_us"]), ("idle", b["idle_us"])], span, span
    )
    longest = max((s.wall_us for s in t.per_step), default=1.0) or 1.0
    steps = "".join(
        f"<tr><td>{_e(s.step)}{'' if s.complete else ' (cut)'}</td><td class=num>{s.wall_us / 1000:.3f}</td>"
        f"<td class=num>{s.idle_us / max(s.wall_us, 1e-9):.0%}</td><td style='width:60%'>"
        + _stack(
            [("compute", s.compute_us), ("non-compute", s.non_compute_us), ("idle", s.idle_us)], s.wall_us, longest
        )
        + "</td></tr>"
        for s in t.per_step
    )
    kernels = "".join(
        f"<tr><td><code>{_e(k['name'])}</code></td><td>{_e(k['group'])}</td><td class=num>{k['count']}</td>"
        f"<td class=num>{k['total_us'] / 1000:.3f}</td><td class=num>{k['share']:.1%}</td></tr>"
        for k in t.kernels
    )
    findings = "".join(
        f"<li><span class=code>{_e(d.code)}</span> {_e(d.message)}{_e(price_text(d))}</li>" for d in diagnostics
    )
    rank = "" if t.rank is None else f" · rank {t.rank}"
    return f"""<section class=trace id='trace-{i}'><h2>Trace <code>{_e(t.file)}</code>{_e(rank)}</h2>
<p>{_e(t.device or "unknown device")} · {t.steps} ProfilerStep ranges · GPU span {span / 1000:.3f} ms:
compute {b["compute_us"] / span:.1%}, non-compute {b["non_compute_us"] / span:.1%}, idle {b["idle_us"] / span:.1%}
<span class=muted>(temporal breakdown as Holistic Trace Analysis defines it)</span></p>
{overall}<p>{legend}</p>
<h3>Step timeline</h3>
<table class=layers><tr><th>step</th><th>wall ms</th><th>GPU idle</th><th>compute · non-compute · idle</th></tr>{steps}</table>
<h3>Findings</h3>{f"<ul>{findings}</ul>" if findings else "<p class=muted>None.</p>"}
<h3>Top kernels</h3>
<table class=layers><tr><th>kernel</th><th>group</th><th>calls</th><th>total ms</th><th>share</th></tr>{kernels}</table>
</section>"""
