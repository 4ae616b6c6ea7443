"""The --what-if section of the HTML report: a bar per transformation (its speed-up on a scale
with a mark at 1×, the per-pass interquartile range as a whisker) and its accuracy cost; then
those that do not apply, with the reason. Static HTML and CSS: it reads without JavaScript."""

from __future__ import annotations

import html

from archlint.report.what_if_table import ranked
from archlint.result import WhatIf
from archlint.units import significant, times


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _pct(x: float, top: float) -> str:
    return f"{100 * max(0.0, min(x, top)) / top:.1f}%"


def _bar(w: WhatIf, top: float) -> str:
    lo, hi = w.spread or (w.speedup, w.speedup)
    cls = {"faster": "good", "slower": "bad"}.get(w.verdict, "flat")
    return (
        f"<div class=wibar title='speed-up {times(w.speedup)} (per-pass IQR {times(lo)[:-1]}–{times(hi)})'>"
        f"<span class='fill {cls}' style='width:{_pct(w.speedup, top)}'></span>"
        f"<span class=iqr style='left:{_pct(lo, top)};width:calc({_pct(hi, top)} - {_pct(lo, top)})'></span>"
        f"<span class=one style='left:{_pct(1.0, top)}'></span></div>"
    )


def _diff(w: WhatIf) -> str:
    if w.max_abs_diff is None:
        return "<span class=muted>outputs not comparable</span>"
    if w.max_abs_diff == 0:
        return "identical outputs"
    return f"max |Δ| {w.max_abs_diff:.2g} · {w.max_rel_diff:.2g} of max |output|"


def what_if_section(what_ifs: list[WhatIf] | None) -> str:
    if not what_ifs:
        return ""
    rows = ranked(what_ifs)
    timed = [w for w in rows if w.speedup is not None]
    top = max([2.0] + [w.speedup * 1.2 for w in timed])  # whiskers beyond the scale are cut at its end
    body = []
    for w in rows:
        if w.speedup is None:
            body.append(
                f"<tr class=na><th>{_e(w.name)}</th><td colspan=4 class=muted>not applicable: {_e(w.reason)}</td></tr>"
            )
            continue
        compile_s = f" · compile {w.compile_s:.1f} s" if w.compile_s is not None else ""
        body.append(
            f"<tr><th>{_e(w.name)}</th><td class=num><b>{times(w.speedup)}</b></td><td class=wicell>{_bar(w, top)}</td>"
            f"<td class=num>{significant(w.baseline_ms, fixed=True)} → {significant(w.transformed_ms, fixed=True)} ms{compile_s}</td>"
            f"<td>{_diff(w)}<br><span class=muted>{_e(w.reason)}</span></td></tr>"
        )
    return (
        "<h3>What if <span class=muted>(standard speed-ups measured end to end on a copy of the model)</span></h3>"
        "<p class=muted>Bar: speed-up = median of the per-pass ratios baseline / transformed "
        f"(scale 0–{top:.1f}×, line at 1×, whisker: "
        "interquartile range of the per-pass speed-ups). Accuracy cost: the largest output difference on the same "
        "input, absolute and relative to the largest output.</p>"
        f"<table class=whatif>{''.join(body)}</table>"
    )
