"""AL103 fragmentation (ShuffleNetV2 G3): a block split into many small fragments — parallel
branches between a fork and its join, or a long series of small ops inside one repeated block.

Fragments are convs, matmuls and pools (the paper counts 13 per NASNet-A block, 2–3 per ResNet
block). Parallel: the branches of a fork/join region that hold fragments of their own. Series:
the longest chain of fragments through a module block (a unit the model repeats). The degree
of parallelism lost is the fragment count itself: the block's FLOPs arrive as that many
launches instead of one, each too small to fill the device. Instances of one block class with
the same structure are reported once, listing them all.
"""

from __future__ import annotations

from archlint.model.checks import _graph as g

CODE = "AL103"
OPTIONS = {
    "max_parallel": 3,  # report a fork/join region with more branches holding fragments
    "max_series": 3,  # report a block whose longest chain has more fragments
}


def check(graph, options, ctx):
    model_flops = sum(int(d.get("flops", 0)) for _, d in g.ops(graph))
    groups: dict[tuple, list] = {}
    parallel: set[str] = set()
    for block in g.fork_join_blocks(graph):
        branches = [b for b in block.branches if any(g.is_fragment(graph.nodes[n]) for n in b)]
        if len(branches) > options["max_parallel"]:
            module = g.common_module(graph, [*block.nodes, block.join])
            parallel.add(module)
            _add(graph, groups, block, module, "parallel", len(branches))
    for block in g.module_blocks(graph):
        chain = g.longest_chain(graph, block.nodes)
        if len(chain) > options["max_series"] and block.name not in parallel:
            _add(graph, groups, block, block.name, "series", len(chain))
    for (_, form, degree, _), found in groups.items():
        yield _finding(graph, ctx, form, degree, found, model_flops)


def _add(graph, groups, block, module, form, degree):
    fragments = [n for n in block.nodes if g.is_fragment(graph.nodes[n])]
    key = (g.module_type(graph, module), form, degree, len(fragments))
    groups.setdefault(key, []).append((module, block, fragments))


def _finding(graph, ctx, form, degree, found, model_flops):
    module, block, fragments = found[0]
    nodes = [n for _, b, _ in found for n in b.nodes]
    flops = sum(int(graph.nodes[n].get("flops", 0)) for _, _, frags in found for n in frags)
    mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in nodes)
    # The cost is parallelism, not memory traffic: no MAC excess; measured latency with --latency.
    price = g.price(graph, ctx, alternative="fewer, wider ops", claims=[f"{n}#launch" for n in nodes])
    kind = g.module_type(graph, module) or "block"
    where = f"{kind} {module or block.name}" + (f" and {len(found) - 1} more like it" if len(found) > 1 else "")
    what = f"{degree} parallel branches" if form == "parallel" else f"a chain of {degree} in series"
    return g.finding(
        graph,
        CODE,
        (
            f"{where}: {len(fragments)} fragments per block ({what}); "
            f"{flops / max(1, model_flops):.1%} of the model's FLOPs arrive in {len(fragments) * len(found)} "
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
            "flops_share": round(flops / model_flops, 6) if model_flops else None,
            "mean_fragment_flops": flops // max(1, len(fragments) * len(found)),
            "blocks_mac_bytes": mac,
        },
    )
