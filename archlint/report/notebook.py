"""A compact, self-contained HTML report for a notebook cell (`Analysis._repr_html_`): the totals,
the findings with their prices and the costliest layers. No script, no external resource; the
full interactive page is `Analysis.to_html(path)`."""

from __future__ import annotations

import html

from archlint.diagnostics import Diagnostic
from archlint.report.wording import location, price_bits
from archlint.result import ModelResult, RunResult
from archlint.units import human_bytes, human_count, significant

STYLE = (
    "font-family:system-ui,sans-serif;font-size:13px;line-height:1.4;"
    "border:1px solid #ccc;border-radius:6px;padding:8px 12px;max-width:60em"
)
CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #eee"


def render_notebook(result: RunResult, top: int = 10) -> str:
    parts = [_model(m, top) for m in result.models]
    parts.append(_findings(sorted(result.diagnostics, key=Diagnostic.sort_key)))
    failed = [g for g in result.gate if not g.passed]
    if failed:
        items = "".join(f"<li>{_e(g.check)}: {_e(g.message)}</li>" for g in failed)
        parts.append(f"<p style='color:#b00'><b>gate failed</b></p><ul>{items}</ul>")
    return f"<div class='archlint-report' style='{STYLE}'>{''.join(parts)}</div>"


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _model(m: ModelResult, top: int) -> str:
    t = m.totals
    figures = [
        ("FLOPs", human_count(t.flops)),
        ("MAC", human_bytes(t.mac_bytes)),
        ("params", human_count(t.params) + (f" ({human_count(t.unused_params)} unused)" if t.unused_params else "")),
    ]
    if t.latency_ms is not None:
        figures.append(("latency", f"{significant(t.latency_ms)} ms on {m.device}"))
    if t.unknown_ops:
        figures.append(("unknown ops", str(t.unknown_ops)))
    head = " · ".join(f"<b>{_e(v)}</b> {_e(k)}" for k, v in figures)
    inputs = ", ".join("×".join(map(str, s)) for s in m.input_shapes)
    layers = sorted(m.layers, key=lambda layer: (layer.latency_ms or 0.0, layer.flops), reverse=True)
    rows = "".join(
        f"<tr><td style='{CELL}'><code>{_e(layer.module or layer.name)}</code></td>"
        f"<td style='{CELL}'>{_e(layer.kind)}</td><td style='{CELL}'>{_e(human_count(layer.flops))}</td>"
        f"<td style='{CELL}'>{_e(human_bytes(layer.mac_bytes))}</td>"
        f"<td style='{CELL}'>{_e(f'{significant(layer.latency_ms)} ms' if layer.latency_ms is not None else '')}</td></tr>"
        for layer in layers[: max(top, 0)]
    )
    notes = "".join(f"<li>{_e(n)}</li>" for n in m.notes)
    return (
        f"<div><b>{_e(m.target)}</b> <span style='color:#666'>({_e(m.strategy)} capture, {_e(m.dtype)}, "
        f"inputs {_e(inputs)})</span></div><div>{head}</div>"
        "<div style='color:#666;font-size:11px'>FLOPs = multiply-adds (1 FMA = 1 FLOP); MAC = bytes read + written</div>"
        f"<table style='border-collapse:collapse;margin-top:6px'><tr><th style='{CELL}'>layer</th>"
        f"<th style='{CELL}'>kind</th><th style='{CELL}'>FLOPs</th><th style='{CELL}'>MAC</th>"
        f"<th style='{CELL}'>latency</th></tr>{rows}</table>"
        + (f"<details><summary>notes ({len(m.notes)})</summary><ul>{notes}</ul></details>" if m.notes else "")
    )


def _findings(diagnostics: list[Diagnostic]) -> str:
    if not diagnostics:
        return "<p style='color:#070'>No findings.</p>"
    items = "".join(
        f"<li><b>{_e(d.code)}</b> <code>{_e(location(d))}</code> {_e(d.message)}"
        + (f" <span style='color:#666'>[{_e('; '.join(price_bits(d)))}]</span>" if price_bits(d) else "")
        + "</li>"
        for d in diagnostics
    )
    return f"<p><b>{len(diagnostics)} finding{'s' * (len(diagnostics) != 1)}</b></p><ul>{items}</ul>"
