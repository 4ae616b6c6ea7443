"""AL109 misaligned-gemm: in an fp16/bf16 model, large GEMM dimensions that miss the multiples
GPUs tile them by (a vocabulary of 50257 instead of 50304), and attention head dimensions the
fused attention kernels do not take.

AL105 asks every channel count for a multiple of 8 (the tensor-core minimum); large GEMMs (the
LM head, hidden and MLP widths) run their best tiles at multiples of 64 (128-byte rows in fp16),
and cuBLAS handles the remainder with a partial wave of tiles: Karpathy measured nanoGPT ~25%
faster with its vocabulary padded from 50257 to 50304. FlashAttention and the memory-efficient
kernels of `F.scaled_dot_product_attention` need head dimensions that are multiples of 8 (and at
most 256); others fall back to the math kernel, which writes the L×S scores to memory.
"""

from __future__ import annotations

import math

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query

CODE = "AL109"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 90  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    "multiple": 64,  # large GEMM dimensions should be multiples of this
    "min_features": 1024,  # dimensions at least this large are judged
    "max_head_dim": 256,  # fused attention kernels take head dims up to this (multiples of 8)
    "dtypes": ["float16", "bfloat16"],
}


def _padded(n: int, m: int) -> int:
    return -(-n // m) * m


def _linear(graph, name, data, options):
    m, least = int(options["multiple"]), int(options["min_features"])
    ins, outs = data.get("in_shapes") or [], data.get("out_shapes") or []
    if not ins or not outs:
        return None
    dims = [("out_features", int(outs[0][-1]))]
    if not query.reads_model_input(graph, name):
        dims.insert(0, ("in_features", int(ins[0][-1])))
    bad = [(k, v) for k, v in dims if v >= least and v % m]
    if not bad:
        return None
    # padding the output width writes a few more columns; the saving is the tail wave's time, which
    # only a measurement shows: statically, the traffic of the padded columns is the (negative) cost
    listed = ", ".join(f"{k}={v} (→ {_padded(v, m)})" for k, v in bad)
    message = (
        f"linear {data.get('module') or name} in {data.get('dtype')} has {listed}: GEMM dimensions of this "
        f"size run their best tiles at multiples of {m}; pad them (unused rows/columns cost almost nothing)"
    )
    return message, {k: v for k, v in bad} | {"multiple": m}, 0


def _attention(graph, name, data, options):
    operands = data.get("attrs", {}).get("operands") or data.get("in_shapes") or []
    if data["key"] == "MultiheadAttention" or not operands or operands[0] is None or len(operands[0]) < 2:
        return None
    head = int(operands[0][-1])
    if head % 8 == 0 and head <= int(options["max_head_dim"]):
        return None
    q, k = operands[0], operands[1] if len(operands) > 1 and operands[1] else operands[0]
    scores = math.prod(q[:-1]) * int(k[-2]) * int(data.get("itemsize", 2))
    message = (
        f"attention in {data.get('module') or name} has head dimension {head}: the fused kernels of "
        f"F.scaled_dot_product_attention take multiples of 8 up to {options['max_head_dim']}, so it runs the "
        f"math kernel, which writes the {'×'.join(map(str, [*q[:-1], k[-2]]))} scores to memory"
    )
    # the math kernel writes the scores, reads them for softmax, writes and reads the probabilities
    return message, {"head_dim": head, "max_head_dim": options["max_head_dim"]}, 4 * scores


def check(graph, options, ctx):
    dtypes = {str(d) for d in options["dtypes"]}
    for name, data in query.ops(graph):
        if str(data.get("dtype", "")).replace("torch.", "") not in dtypes:
            continue
        if data["kind"] == "linear":
            found = _linear(graph, name, data, options)
            alternative = f"dimensions padded to multiples of {options['multiple']}"
            if (
                found
                and "out_features" in found[1]
                and locate.library_module(graph, data.get("module")) == "transformers"
            ):
                # a vocabulary projection of a transformers model: the library pads it (same logits for real tokens)
                alternative = (
                    f"model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of={options['multiple']}) "
                    "(transformers pads the embedding and the tied head)"
                )
                found = (found[0] + f"; with transformers: {alternative}", *found[1:])
        elif data["kind"] == "attention":
            found = _attention(graph, name, data, options)
            alternative = "a head dimension the fused kernels take (a multiple of 8, at most max_head_dim)"
        else:
            continue
        if not found:
            continue
        message, evidence, saved = found
        price = pricing.price(
            graph, ctx, alternative=alternative, mac_bytes_saved=saved or None, claims=[f"{name}#align"]
        )
        yield locate.finding(
            graph,
            CODE,
            message,
            node=name,
            module=data.get("module") or "",
            price=price,
            evidence=evidence | {"dtype": data.get("dtype")},
        )
