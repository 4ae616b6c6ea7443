"""AL103 fragmentation (ShuffleNetV2 G3): a block split into many small fragments — parallel
branches between a fork and its join, or a long series of small ops inside one repeated block.

Fragments are convs, matmuls and pools (the paper counts 13 per NASNet-A block, 2–3 per ResNet
block). Parallel: the branches of a fork/join region that hold fragments of their own. Series:
the longest chain of fragments through a module block (the unit a model repeats). The degree
of parallelism lost is the fragment count itself: the block's FLOPs arrive as that many
launches instead of one, each too small to fill the device.
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
    seen: set[frozenset] = set()
    for block in g.fork_join_blocks(graph):
        branches = [b for b in block.branches if any(g.is_fragment(graph.nodes[n]) for n in b)]
        if len(branches) > options["max_parallel"]:
            yield _finding(graph, ctx, block, "parallel", len(branches), model_flops)
            seen.add(frozenset(block.nodes))
    for block in g.module_blocks(graph):
        chain = g.longest_chain(graph, block.nodes)
        if len(chain) > options["max_series"] and frozenset(block.nodes) not in seen:
            yield _finding(graph, ctx, block, "series", len(chain), model_flops, chain)


def _finding(graph, ctx, block, form, degree, model_flops, chain=None):
    fragments = [n for n in block.nodes if g.is_fragment(graph.nodes[n])]
    flops = sum(int(graph.nodes[n].get("flops", 0)) for n in fragments)
    mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in block.nodes)
    module = block.name if form == "series" else g.common_module(graph, block.nodes + [block.join])
    # The cost is parallelism, not memory traffic: no MAC excess; measured latency with --latency.
    price = g.price(graph, ctx, mac_bytes=None, nodes=block.nodes, flops=flops)
    where = module or block.name
    what = f"{degree} parallel branches" if form == "parallel" else f"a chain of {degree} fragments in series"
    return g.finding(
        graph,
        CODE,
        g.say(
            f"block {where} is split into {len(fragments)} fragments ({what}): "
            f"{flops / max(1, model_flops):.1%} of the model's FLOPs in {len(fragments)} launches "
            f"where fewer, wider ops would fill the device",
            price,
        ),
        node=block.join or (chain or block.nodes)[-1],
        module=module,
        price=price,
        evidence={
            "form": form,
            "fragments": len(fragments),
            "parallel_branches" if form == "parallel" else "series_length": degree,
            "fragment_ops": fragments,
            "fragment_flops": flops,
            "flops_share": round(flops / model_flops, 6) if model_flops else None,
            "mean_fragment_flops": flops // max(1, len(fragments)),
            "block_mac_bytes": mac,
            "fork": block.fork,
            "join": block.join,
        },
    )
