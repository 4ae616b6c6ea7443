"""AL205 unfused-conv-bn: Conv + BatchNorm pairs left unfused in an eval-mode model.

In eval, BatchNorm is a fixed per-channel affine map that folds into the conv's weights and bias
(torch.fx's fuse, torch.ao.quantization.fuse_modules, torch.compile/inductor do it): an unfused BN
is one more full read and write of the activation. One finding per model, with the pairs and
the BN traffic they keep in its evidence.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _graph as g

CODE = "AL205"
OPTIONS = {
    "min_pairs": 1,  # report when at least this many Conv+BN pairs are unfused
}


def check(graph, options, ctx):
    if graph.graph.get("mode", "eval") != "eval":
        return
    pairs = list(g.conv_then_norm(graph))
    if len(pairs) < max(1, options["min_pairs"]):
        return
    norms = [n for _, n in pairs]
    mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in norms)
    conv, norm = max(pairs, key=lambda p: int(graph.nodes[p[1]].get("mac_bytes", 0)))
    args = g.conv_args(graph.nodes[conv])
    costliest = None
    if args:
        costliest = g.whatif(ctx, "folded_bn", *args, bool(g.attr(graph.nodes[conv], "bias", False)))
    price = g.price(graph, ctx, alternative="each BatchNorm folded into the preceding conv's weights and bias", mac_bytes_saved=mac, removed=norms)
    module = graph.nodes[conv].get("module") or ""
    yield g.finding(
        graph,
        CODE,
        (
            f"{len(pairs)} Conv+BatchNorm pair{'s' if len(pairs) > 1 else ''} left unfused in this eval-mode "
            f"model (costliest: {module or conv}); fold BN into the conv before deployment "
            f"(torch.ao.quantization.fuse_modules, torch.fx fusion or torch.compile)"
        ),
        node=conv,
        module=module,
        price=price,
        severity=Severity.INFO,
        evidence={
            "pairs": len(pairs),
            "bn_mac_bytes": mac,
            "pair_nodes": [list(p) for p in pairs],
            "whatif_costliest_pair_ms": costliest,
        },
    )
