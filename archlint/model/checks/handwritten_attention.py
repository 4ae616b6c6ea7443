"""AL106 handwritten-attention: attention written as matmul → [scale, mask] → softmax → [dropout]
→ matmul instead of `F.scaled_dot_product_attention`.

Written by hand, the L×S score tensor is written by the first matmul, read and written again by
each scale, mask and softmax op, and read by the second matmul; SDPA's fused kernels (flash,
memory-efficient) keep it on chip. The price is that traffic: the chain's MAC minus the fused op's
(reading q, k and v and writing the output once). The multiply-adds are the same either way.
"""

from __future__ import annotations

import math

import networkx as nx

from archlint.model.checks import _graph as g

CODE = "AL106"
FIX_IN_CLASS = True  # the finding is the module's own forward: one fix in its class
OPTIONS: dict = {}

_SOFTMAX = frozenset({"softmax", "_softmax", "Softmax", "_safe_softmax", "safe_softmax"})
_SCORE_OPS = frozenset({"elementwise", "reshape", "copy", "activation"})  # scale, mask, casts, views
_PROB_OPS = frozenset({"dropout", "reshape", "copy"})
_MATMULS = frozenset({"matmul", "bmm", "einsum", "baddbmm"})


def _is_matmul(data: dict) -> bool:
    return data["kind"] == "matmul" and data["key"] in _MATMULS and not data.get("param_shapes")


def _last2(data: dict) -> tuple | None:
    shape = (data.get("out_shapes") or [()])[0]
    return tuple(shape[-2:]) if len(shape) >= 2 else None


def _scores(graph: nx.DiGraph, softmax: str) -> tuple[str, list[str]] | None:
    """The matmul that made the scores, and the ops between it and the softmax."""
    want = _last2(graph.nodes[softmax])
    between: list[str] = []
    node = softmax
    while True:
        preds = [p for p in g.tensor_inputs(graph, node) if _last2(graph.nodes[p]) == want]
        if not preds:
            return None
        p = max(preds, key=lambda n: int(graph.nodes[n].get("out_bytes", 0)))
        data = graph.nodes[p]
        if _is_matmul(data):
            return p, between[::-1]
        if data["kind"] not in _SCORE_OPS or data["key"] in _SOFTMAX or len(between) > 8:
            return None
        between.append(p)
        node = p


def _values(graph: nx.DiGraph, softmax: str) -> tuple[str, list[str]] | None:
    """The matmul that reads the probabilities as its first operand, and the ops before it."""
    between: list[str] = []
    node = softmax
    while len(between) <= 4:
        for s in graph.successors(node):
            data = graph.nodes[s]
            if _is_matmul(data) and graph.edges[node, s].get("index", 0) == 0:
                return s, between
        nxt = [s for s in graph.successors(node) if graph.nodes[s]["kind"] in _PROB_OPS]
        if len(nxt) != 1:
            return None
        between.append(nxt[0])
        node = nxt[0]
    return None


def check(graph, options, ctx):
    for name, data in g.ops(graph):
        if data["key"] not in _SOFTMAX or data["kind"] != "activation":
            continue
        scores = _scores(graph, name)
        values = _values(graph, name) if scores else None
        if not values:
            continue
        (qk, before), (av, after) = scores, values
        chain = [qk, *before, name, *after, av]
        mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in chain)
        av_data = graph.nodes[av]
        probs = math.prod(av_data["in_shapes"][0]) * int(av_data.get("itemsize", 4))
        fused = int(graph.nodes[qk].get("in_bytes", 0)) + int(av_data.get("in_bytes", 0)) - probs + int(av_data.get("out_bytes", 0))
        saved = mac - fused
        if saved <= 0:
            continue
        # with --latency: the chain's measured time scaled by the share of its traffic the fused op
        # saves (an estimate: the fused kernel's own time is not measured)
        spent = g.latency(graph, chain)
        price = g.price(
            graph, ctx, alternative="F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...) on the same q, k, v",
            mac_bytes_saved=saved, saving_ms=spent * saved / mac if spent is not None else None, claims=chain,
            estimated=True,
        )
        module = g.common_module(graph, chain)
        score = "×".join(str(d) for d in graph.nodes[name]["out_shapes"][0])
        steps = " → ".join(["matmul", *(g.op_name(graph.nodes[n]) for n in before), "softmax",
                            *(g.op_name(graph.nodes[n]) for n in after), "matmul"])
        yield g.finding(
            graph,
            CODE,
            (
                f"attention written by hand in {module or 'the model'} ({steps}): the {score} score tensor "
                f"goes through memory {len(chain) - 1} times; F.scaled_dot_product_attention fuses it "
                f"(flash / memory-efficient kernels never write it)"
            ),
            node=name,
            module=module,
            price=price,
            evidence={"score_shape": list(graph.nodes[name]["out_shapes"][0]), "ops": chain,
                      "mac_bytes_by_hand": mac, "mac_bytes_fused": fused},
        )
