"""AL205 unfused-conv-bn: Conv + BatchNorm (and Linear + BatchNorm1d) pairs left unfused in an
eval-mode model.

In eval, BatchNorm is a fixed per-channel affine map that folds into the conv's weights and bias
(torch.fx's fuse, torch.ao.quantization.fuse_modules, torch.compile/inductor do it): an unfused BN
is one more full read and write of the activation. One finding per model, with the pairs and
the BN traffic they keep in its evidence. Its saving is the BN ops' traffic (static) or, with
--latency, the whole model timed with every pair folded against it as it is (archlint.model.speedups.fix_timing:
the folded conv gains a bias, which the BN ops' own time would miss); where a module cannot be
edited for its one op, the BN ops' measured time. Where the pairs sit in a module that re-parameterises
itself (`reparameterize()`, `switch_to_deploy()`, `fuse()`: RepVGG, MobileOne, FastViT), the
finding names that method as the fix.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query
from archlint.model.speedups.alternatives import folded_bn
from archlint.model.speedups.fix_timing import fold_norms

CODE = "AL205"
SEVERITY = Severity.INFO  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 10  # where findings overlap, the lowest claims the ops first
FIXED_BY = "fold-bn"  # the --what-if that applies its fix: its measured result prices the finding
OPTIONS = {
    "min_pairs": 1,  # report when at least this many Conv+BN pairs are unfused
}


def check(graph, options, ctx):
    if graph.graph.get("mode", "eval") != "eval":
        return
    pairs = list(query.producer_then_norm(graph))
    if len(pairs) < max(1, options["min_pairs"]):
        return
    norms = [n for _, n in pairs]
    mac = sum(int(graph.nodes[n].get("mac_bytes", 0)) for n in norms)
    conv, norm = max(pairs, key=lambda p: int(graph.nodes[p[1]].get("mac_bytes", 0)))
    args = query.conv_args(graph.nodes[conv]) if graph.nodes[conv]["kind"] == "conv" else None
    costliest = None
    if args:
        costliest = pricing.alternative_ms(
            graph, ctx, [conv, norm], folded_bn, *args, bool(query.attr(graph.nodes[conv], "bias", False))
        )
    folded = pricing.fixed_ms(graph, ctx, fold_norms, pairs)
    alternative = "each BatchNorm folded into the weights and bias of the conv or linear before it"
    if folded is not None:
        alternative += " (timed end to end on the model)"
    elif ctx.pricer is not None:
        alternative += " (the BatchNorms' own measured time: the model could not be edited for these pairs)"
    price = pricing.price(graph, ctx, alternative=alternative, mac_bytes_saved=mac, saving_ms=folded, removed=norms)
    module = graph.nodes[conv].get("module") or ""
    kinds = sorted({"Conv" if graph.nodes[p]["kind"] == "conv" else "Linear" for p, _ in pairs})
    what = "+".join(kinds) if len(kinds) == 1 else "Conv/Linear"
    reparam = _reparameterisable(graph, [p for p, _ in pairs])
    if reparam:
        fix = "; " + ", ".join(f"{t}.{m}()" for t, m in sorted(reparam.items())) + " fold these before deployment"
    else:
        fix = "; fold BN into the conv before deployment (torch.ao.quantization.fuse_modules, torch.fx fusion or torch.compile)"
    yield locate.finding(
        graph,
        CODE,
        (
            f"{len(pairs)} {what}+BatchNorm pair{'s' if len(pairs) > 1 else ''} left unfused in this eval-mode "
            f"model (costliest: {module or conv}){fix}"
        ),
        node=conv,
        module=module,
        price=price,
        severity=SEVERITY,
        evidence={
            "pairs": len(pairs),
            "bn_mac_bytes": mac,
            "pair_nodes": [list(p) for p in pairs],
            "whatif_costliest_pair_ms": costliest,
            "reparameterize": reparam or None,
        },
    )


def _reparameterisable(graph, producers) -> dict[str, str]:
    """Classes on the pairs' module paths that re-parameterise themselves for deployment
    (RepVGG, MobileOne, FastViT): class name → method name."""
    modules = graph.graph.get("modules", {})
    found = {}
    for p in producers:
        path = graph.nodes[p].get("module") or ""
        parts = path.split(".") if path else []
        for i in range(len(parts), -1, -1):
            info = modules.get(".".join(parts[:i]))
            if info and info.get("reparam"):
                found[info["type"]] = info["reparam"]
                break
    return found
