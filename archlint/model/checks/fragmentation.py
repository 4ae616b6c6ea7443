"""AL103 fragmentation (ShuffleNetV2 G3): a block whose work arrives as many small fragments —
parallel branches between a fork and its join, or a long series of small ops inside a repeated
block — each too small to fill the device, so launches and synchronisation dominate.

Fragments are convs, linears, matmuls and pools. Parallel: the branches of a fork/join region
that hold fragments of their own; regions never nest or overlap (the outermost is kept).
Series: the longest chain of fragments through a module block (a unit the model repeats, an
identical item of an nn.Sequential included). Length alone is not enough: a fragment counts only
when it is small for the device — statically, fewer than `small_flops` multiply-adds; with
--latency, launch-bound on the measured basis (under `small_ms` and well below the roofline).

On a GPU --device-spec a fragment is small when the estimate (archlint.model.estimating.estimate) has it
launch-bound (its kernel shorter than the launch) or its GEMM's tiles do not fill one wave of
the SMs — ShuffleNetV2's Table 3 on a 1080Ti: four 64-wide 1×1 convs in series at 56×56 run at
a third of one 128-wide conv's speed, though the FLOPs are equal.

The alternative is the block's small fragments merged into one op of the same work. Where the
merge is exact (archlint.model.checks._merge: pointwise layers in series with nothing between
them, pointwise branches over one input or over the chunks of a split, concatenated) it keeps
the model: no retraining. On a GPU device spec that merged op is priced as it would run — the
estimate of the ops it removes against the estimate of the one op (its tiles and waves
included) — and is a warning when it saves at least `min_saving_share` of the model's estimate.
Otherwise the merge is a new design (info, "retrain"). Statically there is no byte saving
(fragmentation costs launches, not bytes): info. With --latency the saving is estimated from
the measurement — each small fragment's measured time above its roofline time, for all but one
fragment per block.
Instances of one block class with the same structure are reported once, listing them all.
"""

from __future__ import annotations

import math

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _merge as merge
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.checks._blocks import fork_join_blocks, is_fragment, longest_chain, module_blocks
from archlint.model.estimating import estimate
from archlint.units import human_bytes

CODE = "AL103"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 160  # where findings overlap, the lowest claims the ops first
CHANGES_MODEL = True  # merged fragments: other weights, a model to retrain — unless the merge is exact (evidence says)
OPTIONS = {
    "max_parallel": 3,  # report a fork/join region with more branches holding small fragments
    "max_series": 3,  # report a block whose longest chain has more small fragments
    "small_flops": 5_000_000,  # static basis: under this many multiply-adds a fragment is launch-bound on a GPU
    "small_ms": 0.05,  # measured basis: a fragment under this latency (and < half its roofline efficiency) is small
}


def _gpu_spec(ctx):
    spec = ctx.device_spec
    return spec if spec is not None and spec.kind == "gpu" and ctx.estimate else None


def _small(data: dict, options, measured: bool, spec) -> bool:
    if not is_fragment(data):
        return False
    if measured and data.get("latency_ms") is not None:
        roof = data.get("roofline") or {}
        return data["latency_ms"] < options["small_ms"] and roof.get("efficiency", 0.0) < 0.5
    if spec is not None and data.get("estimate_bound") is not None:
        return data["estimate_bound"] == "overhead" or _under_one_wave(data, spec)
    return int(data.get("flops", 0)) < options["small_flops"]


def _under_one_wave(data: dict, spec) -> bool:
    """The op's GEMM cut into the spec's tiles gives the SMs less than one wave of work."""
    g = estimate.gemm_of(data)
    if g is None:
        return False
    tm, tn, _ = estimate.tile_for(data["kind"], g, spec.tile)
    return g.batch * math.ceil(g.m / tm) * math.ceil(g.n / tn) < spec.sms


def check(graph, options, ctx):
    measured = ctx.pricer is not None
    spec = _gpu_spec(ctx)
    small = {n for n, d in query.ops(graph) if _small(d, options, measured, spec)}
    model_flops = sum(int(d.get("flops", 0)) for _, d in query.ops(graph))
    groups: dict[tuple, list] = {}
    taken: set[str] = set()
    regions = sorted(fork_join_blocks(graph), key=lambda b: -len(b.nodes))  # outermost first
    for block in regions:
        if taken & set(block.nodes):
            continue  # nested in, or overlapping, a region already reported
        branches = [b for b in block.branches if any(n in small for n in b)]
        # an exact merge priced on a GPU spec needs no count threshold: the estimate decides;
        # statically neither (nor smallness): the MAC the merge saves decides (_static_merge)
        exact = (
            merge.parallel(graph, block.fork, block.join, block.branches)
            if len(block.branches) >= 2
            and (spec is not None and len(branches) == len(block.branches) or spec is None and not measured)
            else None
        )
        if exact is not None and spec is None and _merge_mac(graph, exact) <= 0:
            exact = None
        if len(branches) > options["max_parallel"] or exact is not None:
            taken |= set(block.nodes)
            module = locate.common_module(graph, [*block.nodes, block.join])
            if exact is None and len(branches) == len(block.branches):
                exact = merge.parallel(graph, block.fork, block.join, block.branches)
            degree = len(block.branches) if exact is not None and spec is None and not measured else len(branches)
            _add(graph, groups, block, module, "parallel", degree, small, exact)
    for block in module_blocks(graph):
        if taken & set(block.nodes):
            continue
        whole = longest_chain(graph, block.nodes)
        chain = [n for n in whole if n in small]
        exact = merge.series(graph, block.nodes, whole) if chain == whole and len(chain) >= 2 else None
        if len(chain) > options["max_series"] or (exact is not None and spec is not None):
            _add(graph, groups, block, block.name, "series", len(chain), small, exact)
    for (_, form, degree, _), found in groups.items():
        yield _finding(graph, ctx, options, form, degree, found, model_flops)


def _merge_mac(graph, exact: merge.Merge) -> int:
    """The MAC bytes an exact merge saves: the ops it removes (the fragments, the concat or split)
    against the one op in their place — the input read once, no concat pass."""
    removed = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in exact.removed)
    return removed - int(exact.op.get("mac_bytes", 0))


def _add(graph, groups, block, module, form, degree, small, exact):
    fragments = [n for n in block.nodes if n in small] or [
        n for n in (exact.removed if exact else ()) if is_fragment(graph.nodes[n])
    ]
    key = (query.module_type(graph, module), form, degree, len(fragments))
    groups.setdefault(key, []).append((module, block, fragments, exact))


def _merged_ms(graph, spec, exact: merge.Merge) -> float:
    """What the exact merge saves on the spec: the estimate of the ops it removes less the
    estimate of the one op in their place (its own tiles, waves and launch)."""
    removed = sum(graph.nodes[n].get("estimated_ms") or 0.0 for n in exact.removed)
    dtype = graph.graph.get("dtype", "float32")
    return removed - estimate.estimate_op(exact.op, spec, dtype).ms


def _overhead(graph, fragments) -> float | None:
    """Measured time above the roofline of all but the largest fragment: what one merged op of
    the same work would not pay again (an estimate from measurements)."""
    times = []
    for n in fragments:
        d = graph.nodes[n]
        roof = d.get("roofline")
        if d.get("latency_ms") is None or not roof:
            return None
        times.append(max(0.0, d["latency_ms"] - roof["attainable_ms"]))
    return sum(times) - max(times, default=0.0)


def _finding(graph, ctx, options, form, degree, found, model_flops):
    module, block, fragments, exact = found[0]
    every = [n for _, _, frags, _ in found for n in frags]
    flops = sum(int(graph.nodes[n].get("flops", 0)) for n in every)
    overheads = [_overhead(graph, frags) for _, _, frags, _ in found]
    saving = sum(overheads) if overheads and all(o is not None for o in overheads) else None
    merges = [m for _, _, _, m in found]
    keeps = all(m is not None for m in merges)
    alternative = (
        exact.text
        if keeps
        else f"the {len(fragments)} small fragments of each block merged into one op of the same work"
    )
    claims = [f"{n}#launch" for n in every]
    spec = _gpu_spec(ctx)
    price = None
    if keeps and spec is not None:
        price = pricing.estimated(
            graph,
            ctx,
            alternative=alternative,
            claims=claims,
            saving_ms=sum(_merged_ms(graph, spec, m) for m in merges),
        )
    elif keeps and form == "parallel" and getattr(ctx, "pricer", None) is None:
        # statically an exact parallel merge saves bytes, not only launches: the input read once
        # and no concat; those ops (the concat) are this finding's (AL104 counts the rest)
        joins = [n for m in merges for n in m.removed if not is_fragment(graph.nodes[n])]
        price = pricing.price(
            graph,
            ctx,
            alternative=alternative,
            mac_bytes_saved=sum(_merge_mac(graph, m) for m in merges),
            claims=[*claims, *joins],
        )
    if price is None:
        price = pricing.price(graph, ctx, alternative=alternative, saving_ms=saving, estimated=True, claims=claims)
    bytes_priced = price.basis == "static" and bool(price.mac_bytes_saved)
    kind = query.module_type(graph, module) or "block"
    where = f"{kind} {module or block.name}" + (f" and {len(found) - 1} more like it" if len(found) > 1 else "")
    what = f"{degree} parallel branches" if form == "parallel" else f"a chain of {degree} in series"
    return locate.finding(
        graph,
        CODE,
        (
            (
                f"{where}: {len(fragments)} fragments per block ({what}) over one input, concatenated; "
                f"{flops / max(1, model_flops):.1%} of the model's FLOPs arrive in {len(every)} launches that read "
                f"the input {len(fragments)}× and pay a concat pass; {alternative} — saves "
                f"{human_bytes(price.mac_bytes_saved)} of memory traffic ({price.saving_share:.1%} of the model's MAC)"
                if bytes_priced
                else f"{where}: {len(fragments)} small fragments per block ({what}); "
                f"{flops / max(1, model_flops):.1%} of the model's FLOPs arrive in {len(every)} "
                f"small launches where fewer, wider ops would fill the device" + (f"; {alternative}" if keeps else "")
            )
            + (
                f" — estimated on {spec.name} to save {price.saving_ms * 1e3:.1f} µs ({price.saving_share:.1%} of the model)"
                if keeps and price.basis == "estimated" and price.saving_ms is not None and _priced_on_spec(ctx)
                else ""
            )
        ),
        node=block.join or block.nodes[-1],
        module=module,
        price=price,
        evidence={
            "form": form,
            "fragments": len(fragments),
            "parallel_branches" if form == "parallel" else "series_length": degree,
            "instances": [m for m, _, _, _ in found],
            "changes_model": not keeps,
            **(
                {"merge": exact.how, "merged_op_flops": sum(int(m.op.get("flops", 0)) for m in merges)} if keeps else {}
            ),
            "fragment_ops": fragments,
            "fragment_flops": flops,
            "flops_share": round(min(1.0, flops / model_flops), 6) if model_flops else None,
            "mean_fragment_flops": flops // max(1, len(every)),
        },
    )


def _priced_on_spec(ctx) -> bool:
    """The price came from the device spec (no measurement in this run)."""
    return ctx.pricer is None and _gpu_spec(ctx) is not None
