"""AL108 unfused-projections: several Linear layers reading the same tensor (separate q, k and v
projections; an MLP's gate and up projections): one wider GEMM does the same work.

Each Linear reads the whole input again and launches its own GEMM; concatenating their weights
into one `nn.Linear(in, sum(outs))` and splitting the output reads the input once, runs one larger
GEMM (better tensor-core occupancy for small widths) and is what fused implementations do (GPT-2's
`c_attn`, nn.MultiheadAttention's `in_proj_weight`). The price is the input reads saved.

The alternative is priced as it would run. A fused width that is not a multiple of `align`
(`nn.Linear(256, 257)`: a 256-wide layer and a 1-wide head) leaves an unaligned leading dimension
(tensor-core GEMMs want multiples of 8 elements) and a partial tile: the alternative offered is
the fused layer padded with zero rows to the next multiple, its output split as before, and its
price counts the padding's weight and output bytes against the reads saved. On a GPU
--device-spec the price is the estimate (archlint.model.estimating.estimate: tiles, waves, launches) of the
separate layers less that of the padded fused one — a fusion that adds a tile and saves only a
launch under a longer kernel does not pay there, and the finding is info.
"""

from __future__ import annotations

from collections import defaultdict

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.checks._repeats import path_pattern
from archlint.model.estimating import estimate

CODE = "AL108"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 80  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    "min_layers": 2,  # report when at least this many Linear layers read the same tensor
    "align": 8,  # the fused width is padded to a multiple of this (tensor-core GEMMs: 8 elements)
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
    for (producer, shape, _dtype), names in readers.items():
        if len(names) < max(2, int(options["min_layers"])):
            continue
        first = graph.nodes[names[0]]
        input_bytes = int(first.get("in_bytes", 0))
        widths = [int(graph.nodes[n]["out_shapes"][0][-1]) for n in names]
        width = sum(widths)
        align = max(1, int(options["align"]))
        padded = -(-width // align) * align
        pad_bytes = _pad_bytes(first, shape, padded - width)
        saved = input_bytes * (len(names) - 1) - pad_bytes
        modules = [graph.nodes[n].get("module") or n for n in names]
        alternative = (
            f"one nn.Linear({shape[-1]}, {width}) whose output is split into {', '.join(map(str, widths))}"
            if padded == width
            else f"one nn.Linear({shape[-1]}, {padded}) — the {width} fused outputs padded with {padded - width} zero rows "
            f"to a multiple of {align} (an unaligned {width}-wide GEMM misses the tensor cores' alignment) — whose "
            f"output is split into {', '.join(map(str, widths))} (the padding dropped)"
        )
        claims = [f"{n}#fuse" for n in names]
        spec = ctx.device_spec
        price = None
        if spec is not None and ctx.estimate:
            fused = _fused_op(graph, names, padded)
            separate = sum(graph.nodes[n].get("estimated_ms") or 0.0 for n in names)
            fused_ms = estimate.estimate_op(fused, spec, graph.graph.get("dtype", "float32")).ms
            price = pricing.estimated(
                graph, ctx, alternative=alternative, saving_ms=separate - fused_ms, claims=claims, mac_bytes_saved=saved
            )
        if price is None:
            price = pricing.price(graph, ctx, alternative=alternative, mac_bytes_saved=saved, claims=claims)
        # layers of the model's own forward (NeRF's alpha_linear and feature_linear, a VAE's mu and
        # logvar heads): placed at the first of them, where the user's code creates it, not at the root
        module = locate.common_module(graph, names) or modules[0]
        if locate.library_module(graph, module) == "diffusers":  # the library fuses its own attention
            price.alternative = "diffusers' model.fuse_qkv_projections() (one q/k/v Linear, same outputs)"
        yield locate.finding(
            graph,
            CODE,
            (
                f"{len(names)} Linear layers read the same {'×'.join(map(str, shape))} tensor "
                f"({_listed(modules)}): one Linear of {padded} outputs"
                + (f" ({width} padded to a multiple of {align})" if padded != width else "")
                + ", split after, reads it once and runs one wider GEMM"
            ),
            node=names[0],
            module=module,
            price=price,
            evidence={
                "layers": modules,
                "out_features": widths,
                "in_features": int(shape[-1]),
                "input": producer,
                "fused_features": padded,
                "padding_bytes": pad_bytes,
                "pattern": ",".join(dict.fromkeys(m.rpartition(".")[2] for m in modules)),
            },
        )


def _pad_bytes(first: dict, shape: tuple, rows: int) -> int:
    """What `rows` zero rows of padding add: their weights, read, and their outputs, written."""
    item = int(first.get("itemsize") or 4)
    tokens = 1
    for v in shape[:-1]:
        tokens *= int(v)
    return item * rows * (int(shape[-1]) + tokens)


def _fused_op(graph, names: list[str], width: int) -> dict:
    """The fused Linear in the OpGraph's op form, `width` outputs, for the estimate."""
    first = graph.nodes[names[0]]
    item = int(first.get("itemsize") or 4)
    k = int(first["in_shapes"][0][-1])
    out = (*first["out_shapes"][0][:-1], width)
    tokens = 1
    for v in out[:-1]:
        tokens *= int(v)
    bias = any("bias" in (graph.nodes[n].get("param_shapes") or {}) for n in names)
    params = width * k + (width if bias else 0)
    out_bytes = item * tokens * width
    in_bytes = int(first.get("in_bytes", 0))
    return {
        **first,
        "key": "Linear",
        "out_shapes": [out],
        "param_shapes": {"weight": (width, k)},
        "flops": tokens * k * width,
        "params": params,
        "param_bytes": item * params,
        "out_bytes": out_bytes,
        "mac_bytes": in_bytes + out_bytes + item * params,
    }


def _listed(modules: list[str]) -> str:
    """The layers, once each: a tensor shared by every block (DeBERTa's position embeddings, read
    by each layer's query_proj and key_proj) is named as the per-block pattern, not layer by layer."""
    owners = list(dict.fromkeys(path_pattern(m.rpartition(".")[0]) for m in modules))
    leaves = list(dict.fromkeys(m.rpartition(".")[2] for m in modules))
    blocks = len({m.rpartition(".")[0] for m in modules})
    if blocks > 1 and len(owners) == 1:
        return f"{', '.join(leaves)} of each of {blocks} blocks {owners[0]}"
    return ", ".join(modules)
