"""Where the time would go on the spec'd device (text report, with --device-spec): the estimate,
labelled as one, beside any measured figure; time by bound; the costliest layers by estimated time
with their place against the spec's roofs."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archlint.result import ModelResult


def samples_per_s(model: ModelResult, latency_ms: float) -> float | None:
    batch = model.input_shapes[0][0] if model.input_shapes and model.input_shapes[0] else None
    return batch / latency_ms * 1e3 if batch and latency_ms > 0 else None


def print_estimate(model: ModelResult, console: Console, top: int = 10) -> None:
    e = model.estimate
    if not e:
        return
    rate = samples_per_s(model, e.latency_ms)
    head = (
        f"  ESTIMATED on {e.device_spec} (static, from the spec sheet; not measured): {e.latency_ms:.3f} ms per forward"
    )
    if rate:
        head += f", ≈ {rate:,.0f} samples/s at batch {model.input_shapes[0][0]}"
    if model.totals.latency_ms is not None:
        head += f" · measured here on {model.device}: {model.totals.latency_ms:.3f} ms"
    console.print(head, markup=False)
    amp = e.autocast
    if amp:  # the same forward under torch.autocast: what AMP throughput tables measure
        batch = model.input_shapes[0][0] if model.input_shapes and model.input_shapes[0] else None
        per_s = f", ≈ {batch * 1e3 / amp['latency_ms']:,.0f} samples/s" if batch and amp["latency_ms"] else ""
        console.print(
            f"  ESTIMATED under torch.autocast ({amp['dtype']}): {amp['latency_ms']:.3f} ms per forward{per_s} "
            f"({amp['assumption']})",
            markup=False,
        )
    for line in e.assumptions:
        console.print(f"    assumes: {line}", markup=False)
    ranked = sorted((la for la in model.layers if la.estimated_ms), key=lambda la: -la.estimated_ms)[: max(0, top)]
    if not ranked:
        return
    table = Table(title=f"slowest {len(ranked)} layers, estimated on {e.device_spec}", title_justify="left")
    for column, justify in (
        ("layer", "left"),
        ("kind", "left"),
        ("est. ms", "right"),
        ("%", "right"),
        ("bound", "left"),
        ("unit", "left"),
        ("FLOP/byte", "right"),
        ("tile eff.", "right"),
    ):
        table.add_column(column, justify=justify, overflow="fold")
    for la in ranked:
        terms = la.estimate_terms or {}
        intensity = f"{2 * la.flops / la.mac_bytes:.1f}" if la.mac_bytes else "-"
        table.add_row(
            la.module or la.name,
            la.kind,
            f"{la.estimated_ms:.4f}",
            f"{la.estimated_ms / e.latency_ms:.1%}",
            la.bound or "-",
            str(terms.get("unit", "-")),
            intensity,
            f"{terms.get('tile_efficiency', 1):.0%}",
        )
    console.print(table)
