"""AL105 misaligned-channels: conv and linear layers whose channel counts are not multiples of 8
in an fp16/bf16 model. Tensor cores take their operands in tiles of 8 half-precision elements
(NVIDIA's deep learning performance guide); other counts are padded or fall back to slower
kernels. The model's input channels (RGB) and depthwise/grouped convs are not judged.
"""

from __future__ import annotations

from archlint.diagnostics import Severity
from archlint.model.checks import _locate as locate
from archlint.model.checks import _pricing as pricing
from archlint.model.checks import _query as query

CODE = "AL105"
SEVERITY = Severity.WARNING  # as its page says (the registry checks)
PRICE = ("static", "measured", "estimated")  # the bases its findings' prices may have, as its page says
FIX = "none"  # no autofix: its page's fix: none
PRIORITY = 130  # where findings overlap, the lowest claims the ops first
OPTIONS = {
    "multiple": 8,  # channel counts should be multiples of this
    "dtypes": ["float16", "bfloat16"],  # only models in these dtypes use tensor cores this way
}


def _channels(graph, name, data) -> list[tuple[str, int]]:
    ins, outs = data.get("in_shapes") or [], data.get("out_shapes") or []
    if not ins or not outs:
        return []
    if data["kind"] == "conv":
        c = query.conv(data)
        if c is None or c.g > 1:
            return []
        found = [("out_channels", c.c2)]
        if not query.reads_model_input(graph, name):
            found.insert(0, ("in_channels", c.c1))
        return found
    if data["kind"] == "linear":
        found = [("out_features", int(outs[0][-1]))]
        if not query.reads_model_input(graph, name):
            found.insert(0, ("in_features", int(ins[0][-1])))
        return found
    return []


def check(graph, options, ctx):
    m = int(options["multiple"])
    dtypes = {str(d) for d in options["dtypes"]}
    layers = []
    for name, data in query.ops(graph):
        if str(data.get("dtype", "")).replace("torch.", "") not in dtypes:
            continue
        bad = [(k, v) for k, v in _channels(graph, name, data) if v % m]
        if bad:
            layers.append((name, data, bad))
    if not layers:
        return
    # One finding per model listing every misaligned layer: one habit (widths not multiples of m).
    name, data, bad = layers[0]
    price = pricing.price(
        graph, ctx, alternative=f"channels padded to multiples of {m}", claims=[f"{n}#align" for n, _, _ in layers]
    )
    listed = "; ".join(
        f"{d['kind']} {d.get('module') or n} " + ", ".join(f"{k}={v} (→ {-(-v // m) * m})" for k, v in b)
        for n, d, b in layers[:3]
    ) + (f"; and {len(layers) - 3} more" if len(layers) > 3 else "")
    yield locate.finding(
        graph,
        CODE,
        (
            f"{len(layers)} layer{'s' if len(layers) > 1 else ''} in {data.get('dtype')} with channel counts "
            f"that are not multiples of {m}, so tensor cores cannot tile them fully: {listed}"
        ),
        node=name,
        module=data.get("module") or "",
        price=price,
        evidence={
            "layers": [{"module": d.get("module") or n, "node": n, **dict(b)} for n, d, b in layers],
            "multiple": m,
            "dtype": data.get("dtype"),
        },
    )
