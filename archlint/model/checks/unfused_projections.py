"""AL108 unfused-projections: several Linear layers reading the same tensor (separate q, k and v
projections; an MLP's gate and up projections): one wider GEMM does the same work.

Each Linear reads the whole input again and launches its own GEMM; concatenating their weights
into one `nn.Linear(in, sum(outs))` and splitting the output reads the input once, runs one larger
GEMM (better tensor-core occupancy for small widths) and is what fused implementations do (GPT-2's
`c_attn`, nn.MultiheadAttention's `in_proj_weight`). The price is the input reads saved.
"""

from __future__ import annotations

from collections import defaultdict

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate, _pricing as pricing, _query as query
from archlint.model.checks._repeats import path_pattern

CODE = "AL108"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRIORITY = 80  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    "min_layers": 2,  # report when at least this many Linear layers read the same tensor
}


def _linear_module(data: dict) -> bool:
    return data["kind"] == "linear" and data["key"] in ("Linear", "LazyLinear", "linear")


def check(graph, options, ctx):
    readers: dict[tuple, list[str]] = defaultdict(list)
    for name, data in query.ops(graph):
        if not _linear_module(data) or not data.get("in_shapes"):
            continue
        preds = query.tensor_inputs(graph, name)
        if len(preds) != 1:
            continue
        readers[(preds[0], tuple(data["in_shapes"][0]), data.get("dtype"))].append(name)
    for (producer, shape, dtype), names in readers.items():
        if len(names) < max(2, int(options["min_layers"])):
            continue
        first = graph.nodes[names[0]]
        input_bytes = int(first.get("in_bytes", 0))
        saved = input_bytes * (len(names) - 1)
        widths = [int(graph.nodes[n]["out_shapes"][0][-1]) for n in names]
        modules = [graph.nodes[n].get("module") or n for n in names]
        price = pricing.price(
            graph, ctx,
            alternative=f"one nn.Linear({shape[-1]}, {sum(widths)}) whose output is split into {', '.join(map(str, widths))}",
            mac_bytes_saved=saved, claims=[f"{n}#fuse" for n in names],
        )
        module = locate.common_module(graph, names)
        if locate.library_module(graph, module) == "diffusers":  # the library fuses its own attention
            price.alternative = "diffusers' model.fuse_qkv_projections() (one q/k/v Linear, same outputs)"
        yield locate.finding(
            graph,
            CODE,
            (
                f"{len(names)} Linear layers read the same {'×'.join(map(str, shape))} tensor "
                f"({_listed(modules)}): one Linear of {sum(widths)} outputs, split after, reads it once "
                f"and runs one wider GEMM"
            ),
            node=names[0],
            module=module,
            price=price,
            evidence={"layers": modules, "out_features": widths, "in_features": int(shape[-1]), "input": producer,
                      "pattern": ",".join(dict.fromkeys(m.rpartition(".")[2] for m in modules))},
        )


def _listed(modules: list[str]) -> str:
    """The layers, once each: a tensor shared by every block (DeBERTa's position embeddings, read
    by each layer's query_proj and key_proj) is named as the per-block pattern, not layer by layer."""
    owners = list(dict.fromkeys(path_pattern(m.rpartition(".")[0]) for m in modules))
    leaves = list(dict.fromkeys(m.rpartition(".")[2] for m in modules))
    blocks = len({m.rpartition(".")[0] for m in modules})
    if blocks > 1 and len(owners) == 1:
        return f"{', '.join(leaves)} of each of {blocks} blocks {owners[0]}"
    return ", ".join(modules)
