"""AL106 handwritten-attention: attention written as matmul → [scale, mask] → softmax → [dropout]
→ matmul instead of `F.scaled_dot_product_attention`.

Written by hand, the L×S score tensor is written by the first matmul, read and written again by
each scale, mask and softmax op, and read by the second matmul; SDPA's fused kernels (flash,
memory-efficient) keep it on chip. The price is that traffic: the chain's MAC minus the fused op's
(reading q, k and v, any bias or mask of the score's size, and writing the output once). The
multiply-adds are the same either way.

Where SDPA is not the alternative: a score put through tanh (Gemma-2's logit softcap) cannot be
expressed as an SDPA mask — torch's flex_attention takes it as a score_mod and fuses the same way;
a head dim above the fused kernels' limit (EdgeNeXt's cross-covariance attention, whose "head dim"
is the token count) leaves SDPA on its unfused math kernel: nothing saved, info. A module that
belongs to a library (transformers) is switched with the library's own setting
(`attn_implementation=`), not rewritten.
"""

from __future__ import annotations

import math
import sys

import networkx as nx

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query

CODE = "AL106"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 60  # where findings overlap, the lowest claims the ops first
FIXED_BY = "sdpa"  # the --what-if that applies its fix: its measured result prices the finding
FIX_IN_CLASS = True  # the finding is the module's own forward: one fix in its class
OPTIONS = {
    "max_head_dim": 256,  # fused attention kernels (flash, memory-efficient) take head dims up to this
}

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
        preds = [p for p in query.tensor_inputs(graph, node) if _last2(graph.nodes[p]) == want]
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
    for name, data in query.ops(graph):
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
        fused = (
            int(graph.nodes[qk].get("in_bytes", 0))
            + int(av_data.get("in_bytes", 0))
            - probs
            + int(av_data.get("out_bytes", 0))
        )
        fused += _score_sized_operands(graph, before, name)  # a bias/mask SDPA would read as attn_mask
        saved = mac - fused
        if saved <= 0:
            continue
        head_dim = int((graph.nodes[qk].get("in_shapes") or [[0]])[0][-1])
        softcap = any(_key(graph, n) == "tanh" for n in before)
        library = locate.library_module(graph, locate.common_module(graph, chain))
        no_switch = library == "transformers" and not _supported(graph, softcap)
        library = library if library in _SWITCHES and not no_switch else None  # only these have a switch for it
        # with --latency: the chain's measured time scaled by the share of its traffic the fused op
        # saves (an estimate: the fused kernel's own time is not measured)
        spent = pricing.latency(graph, chain)
        price = pricing.price(
            graph,
            ctx,
            alternative=_alternative(softcap, library),
            mac_bytes_saved=saved,
            saving_ms=spent * saved / mac if spent is not None else None,
            claims=chain,
            estimated=True,
        )
        module = locate.common_module(graph, chain)
        too_wide = head_dim > int(options["max_head_dim"])
        score = "×".join(str(d) for d in graph.nodes[name]["out_shapes"][0])
        steps = " → ".join(
            [
                "matmul",
                *(query.op_name(graph.nodes[n]) for n in before),
                "softmax",
                *(query.op_name(graph.nodes[n]) for n in after),
                "matmul",
            ]
        )
        yield locate.finding(
            graph,
            CODE,
            (
                f"attention written by hand in {module or 'the model'} ({steps}): the {score} score tensor "
                f"goes through memory {len(chain) - 1} times; {_how(softcap, library)}"
                + (
                    f" (transformers has no {'flex' if softcap else 'SDPA'} attention for "
                    f"{query.module_type(graph, '')}: the class's forward must be changed or patched)"
                    if no_switch
                    else ""
                )
                + (
                    f" — but its head dim is {head_dim}, above the fused kernels' {options['max_head_dim']}: SDPA "
                    "would run its unfused math kernel and save nothing here"
                    if too_wide
                    else ""
                )
            ),
            node=name,
            module=module,
            price=price,
            severity=Severity.INFO if too_wide else Severity.WARNING,
            evidence={
                "score_shape": list(graph.nodes[name]["out_shapes"][0]),
                "ops": chain,
                "mac_bytes_by_hand": mac,
                "mac_bytes_fused": fused,
                "head_dim": head_dim,
                "softcap": softcap,
                "library": library,
            },
        )


def _key(graph: nx.DiGraph, n: str) -> str:
    return query.op_name(graph.nodes[n])


def _score_sized_operands(graph: nx.DiGraph, between: list[str], softmax: str) -> int:
    """Bytes of the extra operands as large as the score (a relative-position bias, a full
    mask) that the scale/mask ops read: the fused op reads them too, as its attn_mask."""
    size = math.prod(graph.nodes[softmax]["out_shapes"][0])
    total = 0
    for n in between:
        data = graph.nodes[n]
        for shape in (data.get("in_shapes") or [])[1:]:
            if math.prod(shape) == size:
                total += size * int(data.get("itemsize", 4))
    return total


_SWITCHES = {  # the library's own switch to its fused attention, by softcap
    "transformers": (
        'attn_implementation="sdpa" when the model is built or loaded',
        'attn_implementation="flex_attention" when the model is built or loaded',
    ),
    "diffusers": ("model.set_attn_processor(AttnProcessor2_0()) (SDPA)", None),
}


def _supported(graph: nx.DiGraph, softcap: bool) -> bool:
    """Does the transformers model class take attn_implementation="sdpa" (or "flex_attention" for
    a softcap)? Read from the class of the model's root, as transformers declares it."""
    tf = sys.modules.get("transformers")  # imported already: the model was built with it
    cls = getattr(tf, query.module_type(graph, "") or "", None) if tf is not None else None
    return bool(getattr(cls, "_supports_flex_attn" if softcap else "_supports_sdpa", False))


def _alternative(softcap: bool, library: str | None) -> str:
    switch = _SWITCHES[library][softcap] if library else None
    if switch:
        return f"{library}'s fused attention: {switch} (same weights, same outputs)"
    if softcap:
        return "torch.nn.attention.flex_attention.flex_attention(q, k, v, score_mod=<the tanh softcap>) on the same q, k, v"
    return "F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...) on the same q, k, v"


def _how(softcap: bool, library: str | None) -> str:
    switch = _SWITCHES[library][softcap] if library else None
    if switch:
        return f"{library} switches it to a fused kernel that never writes it: {switch}"
    if softcap:
        return (
            "the tanh softcap cannot be an SDPA mask; flex_attention with a score_mod fuses it "
            "(its kernel never writes the score)"
        )
    return "F.scaled_dot_product_attention fuses it (flash / memory-efficient kernels never write it)"
