"""The --train section of the HTML report: where the step's FLOPs, bytes and time go (forward,
backward, loss, optimizer), its memory (the peak and what is live there, whether it fits), the
memory timeline over the step as a plot, and the modules that keep the most activations alive
for backward. Static HTML and inline SVG: it reads without JavaScript and loads nothing."""

from __future__ import annotations

import html

from archlint.report.train_rows import StepTable, step_table
from archlint.result import ModelResult
from archlint.train_result import StepMemory, loss_phrase
from archlint.units import bytes_against, human_bytes, human_count

KEPT_ROWS = 12  # modules listed by activations kept; the rest summed in one line
# The timeline plot's box, in SVG user units (it scales with the page's width).
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 240, 78, 16, 14, 34


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def train_section(m: ModelResult) -> str:
    """The section, or "" for a model analyzed without --train."""
    s = m.totals.train
    if s is None:
        return ""
    opt = s.optimizer
    head = (
        f"<p>optimizer <b>{_e(opt['name'])}</b> ({_e(opt['how'])}; {opt['launches']:,} "
        f"launch{'' if opt['launches'] == 1 else 'es'}), loss {_e(loss_phrase(s.loss['name']))} · "
        f"{human_count(s.trainable_params)} trainable parameters, {human_count(s.frozen_params)} frozen</p>"
    )
    split = step_table(m)
    return f"<h3>Training step</h3>{head}{_split(m, split) if split else ''}{_memory(m.memory) if m.memory else ''}"


def _split(m: ModelResult, split: StepTable) -> str:
    est = m.estimate.train if m.estimate is not None else None
    half = (est or {}).get("autocast")
    measured = m.totals.train.measured if m.totals.train is not None else None
    rows = ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>" for cells in split.rows]
    header = "<tr>" + "".join(f"<th>{_e(c)}</th>" for c in split.columns) + "</tr>"
    notes = []
    if est and est.get("mfu") is not None:
        notes.append(
            f"ESTIMATED MFU {est['mfu']:.1%} of {est['peak_unit']} "
            f"({est['peak_flops_per_s'] / 1e12:,.1f} TFLOP/s dense): {est['method']}"
        )
    if half:
        notes.append(f"autocast column: {half['assumption']}")
    if measured:
        notes.append(measured["method"])
    text = "".join(f"<p class=muted>{_e(n)}</p>" for n in notes)
    return f"<table class=trainsplit>{header}{''.join(rows)}</table>{text}"


def _memory(mem: StepMemory) -> str:
    live = ", ".join(f"{k} {human_bytes(v)}" for k, v in mem.at_peak.items() if v)
    rows = [
        ("peak", f"<b>{human_bytes(mem.peak_bytes)}</b> at {_e(mem.at)}"),
        ("live at the peak", _e(live or "—")),
        ("kept for backward", f"{human_bytes(mem.activations_bytes)} of activations at the end of the forward"),
    ]
    needed, budget = mem.needed, mem.budget_bytes
    needed_text, budget_text = bytes_against(needed, budget if budget is not None else needed)
    if mem.device_peak_bytes is not None:
        rows.append(
            (
                "the device needs",
                f"{needed_text} <span class=muted>the allocator's segments"
                + (" replayed under the budget" if budget is not None else "")
                + " and the CUDA context (measured once)</span>",
            )
        )
    elif budget is not None:
        rows.append(("the device needs", f"{needed_text} <span class=muted>the peak</span>"))
    if mem.fits is not None:
        verdict = "fits" if mem.fits else "does not fit"
        rows.append(
            (
                "budget",
                f"<b>{verdict}</b> in {budget_text}"
                + (f" on {_e(mem.device)}" if mem.device else "")
                + (f" <span class=muted>({_e(mem.budget_source)})</span>" if mem.budget_source else ""),
            )
        )
    if mem.max_batch is not None:
        sure = (mem.max_batch_range or [None, None])[1] is not None
        rows.append(
            (
                "largest batch sure to fit" if sure else "largest batch that fits",
                f"{mem.max_batch:,} <span class=muted>memory model, not tried"
                + ("; allowing for its measured error" if sure else "")
                + "</span>",
            )
        )
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    basis = f"<p class=muted>{_e(mem.basis)}; {_e(mem.step_reported)}</p>"
    return (
        f"<h4>Memory over the step</h4><table class=summary>{table}</table>{basis}"
        f"{timeline_svg(mem)}{_kept(mem.per_module_activations)}"
    )


def timeline_svg(mem: StepMemory) -> str:
    """The live bytes after each op of the step as an inline SVG area plot, the peak marked and,
    when it is on the scale, the budget drawn; "" without a timeline."""
    points = mem.timeline
    if len(points) < 2:
        return ""
    ops = max(mem.ops, points[-1][0] + 1)
    peak = max(mem.peak_bytes, max(b for _, b in points))
    budget = mem.budget_bytes
    drawn_budget = budget if budget and budget <= 2 * peak else None  # a far budget would flatten the line
    top = max(peak, drawn_budget or 0) * 1.08 or 1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(op: float) -> float:
        return LEFT + pw * op / max(ops - 1, 1)

    def y(b: float) -> float:
        return TOP + ph * (1 - b / top)

    line = " ".join(f"{x(o):.1f},{y(b):.1f}" for o, b in points)
    area = f"{x(points[0][0]):.1f},{y(0):.1f} {line} {x(points[-1][0]):.1f},{y(0):.1f}"
    parts = [f"<polygon class=area points='{area}'/>", f"<polyline class=line points='{line}'/>"]
    for i in range(5):  # the bytes axis: five ticks from 0
        b = top * i / 4
        parts.append(
            f"<line class=grid x1='{LEFT}' x2='{W - RIGHT}' y1='{y(b):.1f}' y2='{y(b):.1f}'/>"
            f"<text class=tick x='{LEFT - 6}' y='{y(b) + 4:.1f}' text-anchor=end>{_e(human_bytes(b))}</text>"
        )
    for i in range(5):  # the op axis
        o = round((ops - 1) * i / 4)
        parts.append(f"<text class=tick x='{x(o):.1f}' y='{H - BOTTOM + 16}' text-anchor=middle>{o:,}</text>")
    parts.append(
        f"<text class=tick x='{LEFT + pw / 2:.1f}' y='{H - 4}' text-anchor=middle>op of the step "
        "(zero_grad, forward, backward, optimizer.step)</text>"
    )
    po, pb = max(points, key=lambda p: p[1])
    parts.append(
        f"<circle class=peak cx='{x(po):.1f}' cy='{y(pb):.1f}' r='4'/>"
        f"<text class=peak x='{min(x(po) + 8, W - RIGHT - 4):.1f}' y='{max(y(pb) - 6, TOP + 10):.1f}' "
        f"text-anchor='{'end' if x(po) > W * 0.7 else 'start'}'>peak {_e(human_bytes(peak))}</text>"
    )
    if drawn_budget:
        parts.append(
            f"<line class=budget x1='{LEFT}' x2='{W - RIGHT}' y1='{y(drawn_budget):.1f}' y2='{y(drawn_budget):.1f}'/>"
            f"<text class=budget x='{W - RIGHT - 4}' y='{y(drawn_budget) - 5:.1f}' text-anchor=end>"
            f"budget {_e(human_bytes(drawn_budget))}</text>"
        )
    caption = (
        f"Live bytes after each of the step's {ops:,} ops ({len(points)} points, each the highest of its "
        "stretch, so the peak is kept): parameters, gradients, optimizer state, activations and temporaries"
    )
    if mem.device_peak_bytes is not None:
        caption += (
            "; allocated blocks (rounded as the CUDA caching allocator rounds them), not the segments it reserves"
        )
    if budget and not drawn_budget:
        caption += f"; the budget, {human_bytes(budget)}, is off the scale"
    return (
        f"<figure class=memtimeline><svg viewBox='0 0 {W} {H}' role=img "
        f"aria-label='memory over the training step, peak {_e(human_bytes(peak))}'>"
        f"<title>memory over the training step</title>{''.join(parts)}</svg>"
        f"<figcaption class=muted>{_e(caption)}</figcaption></figure>"
    )


def _kept(per_module: dict[str, int]) -> str:
    if not per_module:
        return ""
    items = sorted(per_module.items(), key=lambda kv: -kv[1])
    total = sum(per_module.values()) or 1
    rows = "".join(
        f"<tr><td><code>{_e(p)}</code></td><td>{human_bytes(b)}</td><td>{b / total:.1%}</td></tr>"
        for p, b in items[:KEPT_ROWS]
    )
    rest = items[KEPT_ROWS:]
    if rest:
        rows += (
            f"<tr><td class=muted>{len(rest)} more modules</td><td>{human_bytes(sum(b for _, b in rest))}</td>"
            f"<td>{sum(b for _, b in rest) / total:.1%}</td></tr>"
        )
    return (
        "<h4>Activations kept for backward, by module</h4><p class=muted>What is saved at the end of the "
        "forward, by the module whose forward made it (the module tree, --tree, sums them by subtree)</p>"
        f"<table class=kept><tr><th>module</th><th>kept</th><th>share</th></tr>{rows}</table>"
    )
