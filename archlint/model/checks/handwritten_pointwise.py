"""AL110 handwritten-fused-op: element-wise chains written by hand where torch has one fused op:
GELU's tanh approximation (`0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` → `F.gelu(x,
approximate="tanh")`), RMSNorm (`x · rsqrt(mean(x²) + ε)` → `F.rms_norm`), LayerNorm (`(x − mean) /
sqrt(var + ε)` → `F.layer_norm`) and softmax (`exp(x) / sum(exp(x))` → `F.softmax`).

Each op of the chain reads and writes the whole activation; the fused op reads it once and writes
it once. Norms count only over the trailing dims, as F.layer_norm and F.rms_norm take them: a
channels-first norm over dim 1 of NCHW (timm's LayerNorm2d/RmsNorm2d fallbacks) has no one-op
equivalent that keeps its layout. The price is the difference: the chain's MAC minus one pass (input + weights + output).
"""

from __future__ import annotations

import networkx as nx

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query

CODE = "AL110"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 100  # where findings overlap, the lowest claims the ops first
FIX_IN_CLASS = True  # the finding is the module's own forward: one fix in its class
OPTIONS: dict = {}

_VIEWS = ("reshape", "copy")
_DIV = ("div", "truediv")


def _key(graph: nx.DiGraph, n: str) -> str:
    return str(graph.nodes[n]["key"]).lower()


def _back(graph: nx.DiGraph, n: str, keys: tuple[str, ...], chain: list[str]) -> str | None:
    """The predecessor of n with one of `keys` (looking through views and casts, added to chain)."""
    for p in query.tensor_inputs(graph, n):
        seen = []
        while graph.nodes[p]["kind"] in _VIEWS and _key(graph, p) not in keys:
            preds = query.tensor_inputs(graph, p)
            if not preds:
                break
            seen.append(p)
            p = preds[0]
        if _key(graph, p) in keys:
            chain.extend(seen)
            chain.append(p)
            return p
    return None


def _forward(graph: nx.DiGraph, n: str, keys: tuple[str, ...], chain: list[str]) -> str | None:
    for s in graph.successors(n):
        if _key(graph, s) in keys:
            chain.append(s)
            return s
    return None


def _gelu_tanh(graph, t):
    chain = [t]
    ok = (
        (m := _back(graph, t, ("mul",), chain))
        and (a := _back(graph, m, ("add",), chain))
        and (c := _back(graph, a, ("mul",), chain))
        and _back(graph, c, ("pow",), chain)
    )
    ok = ok and (a2 := _forward(graph, t, ("add",), chain)) and (m2 := _forward(graph, a2, ("mul",), chain))
    if not ok:
        return None
    _forward(graph, m2, ("mul",), chain)  # 0.5 · x · (...) may be two multiplications
    return "GELU (tanh approximation)", 'F.gelu(x, approximate="tanh")', chain


def _norm(graph, r):
    chain = [r]
    if not ((a := _back(graph, r, ("add",), chain)) and (m := _back(graph, a, ("mean", "var"), chain))):
        return None
    if _key(graph, m) == "var" or ((p := _back(graph, m, ("pow", "mul"), chain)) and _back(graph, p, ("sub",), chain)):
        if _key(graph, m) != "var":
            _back(graph, chain[-1], ("mean",), chain)
        name, fused = "LayerNorm", "F.layer_norm(x, normalized_shape, weight, bias, eps)"
    elif _key(graph, m) == "mean" and _back(graph, m, ("pow", "mul"), chain):
        name, fused = "RMSNorm", "F.rms_norm(x, normalized_shape, weight, eps) (torch ≥ 2.4)"
    else:
        return None
    if not _trailing(graph.nodes[m]):
        return None  # a channels-first norm (over dim 1 of NCHW): the fused ops normalize trailing dims only
    if not (x := _forward(graph, r, ("mul", *_DIV), chain)):
        return None
    nxt = x
    while (s := [n for n in graph.successors(nxt) if graph.nodes[n]["kind"] in _VIEWS]) and len(chain) < 14:
        chain.append(s[0])
        nxt = s[0]
    if (w := _forward(graph, nxt, ("mul",), chain)) and graph.nodes[w].get("param_shapes"):
        _forward(graph, w, ("add",), chain)  # the bias
    elif w:
        chain.remove(w)
    return name, fused, chain


def _trailing(data: dict) -> bool:
    """Does the reduction (mean/var) run over the input's last dims, as F.layer_norm and
    F.rms_norm do? Read from its shapes: the output keeps the leading dims and drops (or keeps
    as 1) the trailing ones."""
    ins, outs = data.get("in_shapes") or [], data.get("out_shapes") or []
    if not ins or not outs:
        return True  # no shapes to tell: as before
    x, y = tuple(ins[0]), tuple(outs[0])
    if len(y) == len(x):  # keepdim
        k = next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), len(x))
        return all(b == 1 for b in y[k:])
    return x[: len(y)] == y


def _softmax(graph, e):
    chain = [e]
    total = _forward(graph, e, ("sum",), chain)
    if not total:
        return None
    div = next((s for s in graph.successors(total) if _key(graph, s) in _DIV and graph.has_edge(e, s)), None)
    if div is None:
        return None
    chain.append(div)
    if (sub := _back(graph, e, ("sub",), chain)) and not _back(graph, sub, ("amax", "max"), chain):
        chain.remove(sub)
    return "softmax", "F.softmax(x, dim)", chain


_ANCHORS = {"tanh": _gelu_tanh, "rsqrt": _norm, "sqrt": _norm, "exp": _softmax}


def check(graph, options, ctx):
    claimed: set[str] = set()
    for name, data in query.ops(graph):
        match = _ANCHORS.get(str(data["key"]).lower())
        found = match(graph, name) if match else None
        if not found:
            continue
        what, fused, chain = found
        chain = list(dict.fromkeys(chain))
        if claimed & set(chain):
            continue
        claimed |= set(chain)
        nodes = [graph.nodes[n] for n in chain]
        mac = sum(int(d.get("mac_bytes", 0)) for d in nodes)
        order = list(nx.topological_sort(graph.subgraph(chain)))
        first, final = graph.nodes[order[0]], graph.nodes[order[-1]]
        one_pass = (
            int(first.get("in_bytes", 0))
            + sum(int(d.get("param_bytes", 0)) for d in nodes)
            + int(final.get("out_bytes", 0))
        )
        saved = mac - one_pass
        if saved <= 0:
            continue
        spent = pricing.latency(graph, chain)  # --latency: the chain's time scaled by the traffic saved (estimate)
        price = pricing.price(
            graph,
            ctx,
            alternative=f"one {fused} on the same input",
            mac_bytes_saved=saved,
            saving_ms=spent * saved / mac if spent is not None else None,
            claims=chain,
            estimated=True,
        )
        module = locate.common_module(graph, chain)
        if what.startswith("GELU") and locate.library_module(graph, module) == "transformers":
            # NewGELUActivation ("gelu_new"): the config's activation key selects the fused op
            price.alternative = (
                'config hidden_act / activation_function = "gelu_pytorch_tanh" '
                '(F.gelu(x, approximate="tanh"): same function, same weights)'
            )
            fused = price.alternative
        steps = " → ".join(_key(graph, n) for n in order)
        yield locate.finding(
            graph,
            CODE,
            (
                f"{what} written by hand in {module or 'the model'} ({len(chain)} ops: {steps}): each reads and "
                f"writes the activation; {fused} does it in one pass"
            ),
            node=order[0],
            module=module,
            price=price,
            evidence={"pattern": what, "ops": order, "mac_bytes_by_hand": mac, "mac_bytes_fused": one_pass},
        )
