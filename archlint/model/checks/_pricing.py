"""Pricing for the model checks: a finding's saving against its alternative, on the basis the
run has (measured with --latency, estimated with --device-spec, else static MAC), and the timed
alternatives behind it — a layer against its local alternative (archlint.model.speedups.alternatives) or
the whole model with a rule's fix applied (archlint.model.speedups.fix_timing). A rule passes the
alternative or fix itself (`alternatives.conv_without_bias`, `fix_timing.fold_norms`), never its name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import networkx as nx

from archlint.diagnostics import Price
from archlint.model.checks._query import module_mac
from archlint.model.opgraph import ops
from archlint.model.speedups import fix_timing
from archlint.model.timing.paired import WithinNoise

Alternative = Callable[
    ..., float | None
]  # one of archlint.model.speedups.alternatives: (pricer, *layer) → relative saving


def latency(graph: nx.DiGraph, nodes: Iterable[str]) -> float | None:
    values = [graph.nodes[n].get("latency_ms") for n in nodes]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def model_latency(graph: nx.DiGraph, ctx) -> float | None:
    """The model's end-to-end latency (measured), else the sum of the op latencies."""
    pricer = ctx.pricer
    end_to_end = getattr(pricer, "end_to_end_ms", None) if pricer is not None else None
    if end_to_end:
        return float(end_to_end)
    return latency(graph, (n for n, _ in ops(graph)))


def price(
    graph: nx.DiGraph,
    ctx,
    *,
    alternative: str,
    mac_bytes_saved: int | None = None,
    flops_saved: int | None = None,
    saving_ms: float | None = None,
    removed: Iterable[str] = (),
    claims: Iterable[str] | None = None,
    estimated: bool = False,
) -> Price:
    """A finding's price: what `alternative` saves. With --latency the basis is measured — the
    rule's what-if `saving_ms` when it timed one, else the measured time of the `removed` ops
    (those the alternative does away with entirely) — as a share of the model's measured latency.
    Without, with --device-spec and ops to remove, it is estimated: their estimated time as a
    share of the model's estimate. Otherwise, or when nothing could be timed, it is static: the
    MAC saved as a share of the model's MAC. `claims` (default: the removed ops) are the ops the saving is made of;
    `estimated` labels a saving_ms derived from measured times by a model (a proportion)."""
    removed = list(removed)
    claims = tuple(removed if claims is None else claims)
    pricer = ctx.pricer
    if pricer is not None:
        if saving_ms is None and removed:
            saving_ms = latency(graph, removed)
        whole = model_latency(graph, ctx)
        if saving_ms is not None and whole:
            device = getattr(pricer, "device", None)
            return Price.timed(
                alternative,
                saving_ms=saving_ms,
                model_ms=whole,
                basis="estimated" if estimated else "measured",
                mac_bytes_saved=mac_bytes_saved,
                flops_saved=flops_saved,
                device=str(device) if device is not None else None,
                claims=claims,
            )
    estimate = ctx.estimate
    if pricer is None and estimate and removed:  # no measurement: the device-spec estimate of the removed ops
        saving = sum(graph.nodes[n].get("estimated_ms") or 0.0 for n in removed)
        return Price.timed(
            alternative,
            saving_ms=saving,
            model_ms=estimate.latency_ms,
            basis="estimated",
            mac_bytes_saved=mac_bytes_saved,
            flops_saved=flops_saved,
            device=estimate.device_spec,
            claims=claims,
        )
    return Price.static(
        alternative,
        mac_bytes_saved=mac_bytes_saved,
        model_mac_bytes=module_mac(graph),
        flops_saved=flops_saved,
        claims=claims,
    )


def estimated(
    graph: nx.DiGraph,
    ctx,
    *,
    alternative: str,
    saving_ms: float,
    claims: Iterable[str] = (),
    mac_bytes_saved: int | None = None,
    flops_saved: int | None = None,
) -> Price | None:
    """A saving the rule estimated on the --device-spec (the ops it removes against the op it
    puts in their place, both from archlint.model.estimating.estimate), as a share of the model's estimate;
    None without a device spec, or with --latency (a measurement decides then)."""
    estimate = ctx.estimate
    if ctx.pricer is not None or not estimate:
        return None
    return Price.timed(
        alternative,
        saving_ms=saving_ms,
        model_ms=estimate.latency_ms,
        basis="estimated",
        mac_bytes_saved=mac_bytes_saved,
        flops_saved=flops_saved,
        device=estimate.device_spec,
        claims=tuple(claims),
    )


def relative_saving(ctx, alternative: Alternative, *args) -> float | None:
    """An alternative's relative saving (one of archlint.model.speedups.alternatives: (original − alternative) /
    original, measured with ctx.pricer); None without --latency or when it cannot be built.
    Only 2-D convs have alternatives built (callers check the input is 4-D)."""
    if ctx.pricer is None:
        return None
    return alternative(ctx.pricer, *args)


def alternative_ms(graph: nx.DiGraph, ctx, nodes: Iterable[str], alternative: Alternative, *args) -> float | None:
    """An alternative's saving in ms: its relative saving times the measured in-model time of the ops
    it replaces (so it never exceeds what they cost in this model)."""
    fraction = relative_saving(ctx, alternative, *args)
    spent = latency(graph, nodes) if fraction is not None else None
    if spent is None:
        return None
    if isinstance(fraction, WithinNoise):  # inside the noise: 0 ms, the noise in ms of these ops
        return WithinNoise(fraction.noise * spent)
    return fraction * spent


def fixed_ms(graph, ctx, fix: fix_timing.Fix, nodes: Iterable) -> float | None:
    """What the whole model saves, measured end to end, with a fix of archlint.model.speedups.fix_timing
    (fold_norms on (layer, norm) pairs, drop_bias on convs) applied to its modules; None
    without --latency, or where a node's module cannot be edited for that op alone (the graph
    shows it running more than one op, or the op is functional inside a bigger module)."""
    if ctx.pricer is None:
        return None
    ran = Counter(d.get("module") for _, d in ops(graph))

    def path(node: str) -> str | None:
        module = graph.nodes[node].get("module")
        return module if module and ran[module] == 1 else None

    paths = tuple(tuple(path(n) for n in item) if isinstance(item, tuple) else path(item) for item in nodes)
    if any(p is None or (isinstance(p, tuple) and None in p) for p in paths):
        return None
    return fix_timing.saving_ms(ctx.pricer, fix, paths)
