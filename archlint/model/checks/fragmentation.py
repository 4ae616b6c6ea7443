"""AL103 fragmentation (ShuffleNetV2 G3): a block whose work arrives as many small fragments —
parallel branches between a fork and its join, or a long series of small ops inside a repeated
block — each too small to fill the device, so launches and synchronisation dominate.

Fragments are convs, linears, matmuls and pools. Parallel: the branches of a fork/join region
that hold fragments of their own; regions never nest or overlap (the outermost is kept).
Series: the longest chain of fragments through a module block (a unit the model repeats, an
identical item of an nn.Sequential included). Length alone is not enough: a fragment counts only
when it is small for the device — statically, fewer than `small_flops` multiply-adds; with
--latency, launch-bound on the measured basis (under `small_ms` and well below the roofline).

The alternative is the block's small fragments merged into one op of the same work; its saving
is the launch overhead that removes. Statically there is no byte saving (fragmentation costs
launches, not bytes): the finding is info. With --latency the saving is estimated from the
measurement — each small fragment's measured time above its roofline time, for all but one
fragment per block — and is a warning when at least `min_saving_share` of the model.
Instances of one block class with the same structure are reported once, listing them all.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate, _pricing as pricing, _query as query
from archlint.model.checks._blocks import fork_join_blocks, is_fragment, longest_chain, module_blocks

CODE = "AL103"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRIORITY = 160  # where findings overlap, the lowest claims the ops first
CHANGES_MODEL = True  # merged fragments: other weights, a model to retrain
OPTIONS = {
    "max_parallel": 3,  # report a fork/join region with more branches holding small fragments
    "max_series": 3,  # report a block whose longest chain has more small fragments
    "small_flops": 5_000_000,  # static basis: under this many multiply-adds a fragment is launch-bound on a GPU
    "small_ms": 0.05,  # measured basis: a fragment under this latency (and < half its roofline efficiency) is small
}


def _small(data: dict, options, measured: bool) -> bool:
    if not is_fragment(data):
        return False
    if measured and data.get("latency_ms") is not None:
        roof = data.get("roofline") or {}
        return data["latency_ms"] < options["small_ms"] and roof.get("efficiency", 0.0) < 0.5
    return int(data.get("flops", 0)) < options["small_flops"]


def check(graph, options, ctx):
    measured = getattr(ctx, "pricer", None) is not None
    small = {n for n, d in query.ops(graph) if _small(d, options, measured)}
    model_flops = sum(int(d.get("flops", 0)) for _, d in query.ops(graph))
    groups: dict[tuple, list] = {}
    taken: set[str] = set()
    regions = sorted(fork_join_blocks(graph), key=lambda b: -len(b.nodes))  # outermost first
    for block in regions:
        if taken & set(block.nodes):
            continue  # nested in, or overlapping, a region already reported
        branches = [b for b in block.branches if any(n in small for n in b)]
        if len(branches) > options["max_parallel"]:
            taken |= set(block.nodes)
            module = locate.common_module(graph, [*block.nodes, block.join])
            _add(graph, groups, block, module, "parallel", len(branches), small)
    for block in module_blocks(graph):
        if taken & set(block.nodes):
            continue
        chain = [n for n in longest_chain(graph, block.nodes) if n in small]
        if len(chain) > options["max_series"]:
            _add(graph, groups, block, block.name, "series", len(chain), small)
    for (_, form, degree, _), found in groups.items():
        yield _finding(graph, ctx, options, form, degree, found, model_flops)


def _add(graph, groups, block, module, form, degree, small):
    fragments = [n for n in block.nodes if n in small]
    key = (query.module_type(graph, module), form, degree, len(fragments))
    groups.setdefault(key, []).append((module, block, fragments))


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
    module, block, fragments = found[0]
    every = [n for _, _, frags in found for n in frags]
    flops = sum(int(graph.nodes[n].get("flops", 0)) for n in every)
    overheads = [_overhead(graph, frags) for _, _, frags in found]
    saving = sum(overheads) if overheads and all(o is not None for o in overheads) else None
    alternative = f"the {len(fragments)} small fragments of each block merged into one op of the same work"
    price = pricing.price(graph, ctx, alternative=alternative, saving_ms=saving, estimated=True,
                    claims=[f"{n}#launch" for n in every])
    kind = query.module_type(graph, module) or "block"
    where = f"{kind} {module or block.name}" + (f" and {len(found) - 1} more like it" if len(found) > 1 else "")
    what = f"{degree} parallel branches" if form == "parallel" else f"a chain of {degree} in series"
    return locate.finding(
        graph,
        CODE,
        (
            f"{where}: {len(fragments)} small fragments per block ({what}); "
            f"{flops / max(1, model_flops):.1%} of the model's FLOPs arrive in {len(every)} "
            f"small launches where fewer, wider ops would fill the device"
        ),
        node=block.join or block.nodes[-1],
        module=module,
        price=price,
        evidence={
            "form": form,
            "fragments": len(fragments),
            "parallel_branches" if form == "parallel" else "series_length": degree,
            "instances": [m for m, _, _ in found],
            "fragment_ops": fragments,
            "fragment_flops": flops,
            "flops_share": round(min(1.0, flops / model_flops), 6) if model_flops else None,
            "mean_fragment_flops": flops // max(1, len(every)),
        },
    )
