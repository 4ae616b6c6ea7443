"""Where the time goes (text report, with --latency): end to end vs the sum of the ops, the share
of time in element-wise, memory-only and compute ops, and the slowest ops with their roofline
bound and efficiency. Reads only the ModelResult; no torch."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from archlint.result import KIND_FAMILIES, Layer, ModelResult, kind_family


def efficiency_text(efficiency: float) -> str:
    """An op's share of its roof; above 100% the roof, not the op, is wrong (peaks measured low, on
    a busy machine): said so instead of a figure no op can reach."""
    return f"{efficiency:.1%}" if efficiency <= 1.0 else ">100% (roof low)"


def shares(layers: list[Layer]) -> dict[str, float]:
    """Fraction of the summed per-op latency in each family (compute, element-wise, memory-only,
    other); empty when nothing was timed."""
    timed = [layer for layer in layers if layer.latency_ms is not None]
    total = sum(layer.latency_ms for layer in timed)
    if not total:
        return {}
    out = {name: 0.0 for name in KIND_FAMILIES} | {"other": 0.0}
    for layer in timed:
        out[kind_family(layer.kind)] += layer.latency_ms / total
    return out


def _ms(value: float) -> str:
    """Three significant digits, without the trailing point of a 3-digit number."""
    return f"{value:.0f}" if value >= 99.95 else f"{value:#.3g}"


def print_time(model: ModelResult, console: Console, top: int = 10) -> None:
    timed = sorted((la for la in model.layers if la.latency_ms is not None), key=lambda la: -la.latency_ms)
    if not timed:
        return
    t = model.totals
    op_sum = sum(la.latency_ms for la in timed)
    head = f"[bold]Latency[/] on {model.device}"
    if t.latency_ms is not None:
        head += f": {t.latency_ms:.3f} ms end to end"
        if t.latency_ms_sum_of_ops is not None:
            ratio = t.latency_ms_sum_of_ops / t.latency_ms
            head += f", {t.latency_ms_sum_of_ops:.3f} ms summed over ops ({ratio:.1%} of end to end)"
    console.print(head)
    if model.timing:
        console.print(f"  timed: {model.timing}", style="dim")
    p = model.roofline
    if p:
        ridge = p["peak_flops_per_s"] / p["bandwidth_bytes_per_s"]
        console.print(
            f"  roofline: {p['peak_flops_per_s'] / 1e9:,.1f} GFLOP/s matmul peak, "
            f"{p['bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s copy bandwidth, ridge {ridge:.1f} FLOP/byte "
            "(intensity = 2·FLOPs / MAC)",
            style="dim",
        )
    share = shares(model.layers)
    console.print(
        "  share of op time: "
        + ", ".join(f"{name} {value:.1%}" for name, value in share.items() if value or name != "other")
    )
    table = Table(title=f"slowest {min(top, len(timed))} of {len(timed)} timed ops", title_justify="left")
    for column, justify in (
        ("op", "left"),
        ("kind", "left"),
        ("ms", "right"),
        ("IQR ms", "right"),
        ("share", "right"),
        ("bound", "left"),
        ("roofline eff.", "right"),
    ):
        table.add_column(column, justify=justify)
    for la in timed[:top]:
        spread = f"{_ms(la.latency_spread_ms[0])}–{_ms(la.latency_spread_ms[1])}" if la.latency_spread_ms else ""
        roof = la.roofline or {}
        table.add_row(
            Text(la.label),  # user-derived: no markup
            Text(la.kind),
            _ms(la.latency_ms),
            spread,
            f"{la.latency_ms / op_sum:.1%}",
            roof.get("bound", "–"),
            efficiency_text(roof["efficiency"]) if "efficiency" in roof else "–",
        )
    console.print(table)
