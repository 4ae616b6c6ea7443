"""AL204 conv-bias-before-norm: a conv with bias=True whose output goes straight into BatchNorm
(or InstanceNorm). The norm subtracts the per-channel mean, so the bias cancels exactly: its
parameters are stored, read, updated and added for nothing (PyTorch performance tuning guide:
"disable bias for convolutions directly followed by a batch norm").
"""

from __future__ import annotations

from archlint.model.checks import _graph as g

CODE = "AL204"
OPTIONS: dict = {}


def check(graph, options, ctx):
    for conv, norm in g.conv_then_norm(graph):
        data = graph.nodes[conv]
        if not g.attr(data, "bias", False):
            continue
        c = g.conv(data)
        c2 = c.c2 if c else int(g.attr(data, "out_channels", 0))
        itemsize = int(data.get("itemsize", 4))
        args = g.conv_args(data)
        saving = g.whatif(ctx, "conv_without_bias", *args) if args else None
        price = g.price(graph, ctx, mac_bytes=c2 * itemsize, nodes=[conv], whatif_ms=saving)
        module = data.get("module") or ""
        yield g.finding(
            graph,
            CODE,
            (
                f"conv {module or conv} has a bias that {g.op_name(graph.nodes[norm])} "
                f"{graph.nodes[norm].get('module') or norm} cancels: set bias=False ({c2} wasted parameters)"
            ),
            node=conv,
            module=module,
            price=price,
            evidence={"norm": norm, "bias_parameters": c2, "bias_bytes": c2 * itemsize,
                      "whatif": "conv without bias" if saving is not None else None},
        )
