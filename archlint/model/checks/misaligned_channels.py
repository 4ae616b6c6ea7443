"""AL105 misaligned-channels: conv and linear layers whose channel counts are not multiples of 8
in an fp16/bf16 model. Tensor cores take their operands in tiles of 8 half-precision elements
(NVIDIA's deep learning performance guide); other counts are padded or fall back to slower
kernels. The model's input channels (RGB) and depthwise/grouped convs are not judged.
"""

from __future__ import annotations

from archlint.model.checks import _graph as g

CODE = "AL105"
OPTIONS = {
    "multiple": 8,  # channel counts should be multiples of this
    "dtypes": ["float16", "bfloat16"],  # only models in these dtypes use tensor cores this way
}


def _channels(graph, name, data) -> list[tuple[str, int]]:
    ins, outs = data.get("in_shapes") or [], data.get("out_shapes") or []
    if not ins or not outs:
        return []
    if data["kind"] == "conv":
        c = g.conv(data)
        if c is None or c.g > 1:
            return []
        found = [("out_channels", c.c2)]
        if not g.reads_model_input(graph, name):
            found.insert(0, ("in_channels", c.c1))
        return found
    if data["kind"] == "linear":
        found = [("out_features", int(outs[0][-1]))]
        if not g.reads_model_input(graph, name):
            found.insert(0, ("in_features", int(ins[0][-1])))
        return found
    return []


def check(graph, options, ctx):
    m = int(options["multiple"])
    dtypes = {str(d) for d in options["dtypes"]}
    for name, data in g.ops(graph):
        if str(data.get("dtype", "")).replace("torch.", "") not in dtypes:
            continue
        bad = [(k, v) for k, v in _channels(graph, name, data) if v % m]
        if not bad:
            continue
        module = data.get("module") or ""
        price = g.price(graph, ctx, alternative=f"channels padded to multiples of {m}", claims=[f"{name}#align"])
        listed = ", ".join(f"{k}={v} (→ {-(-v // m) * m})" for k, v in bad)
        yield g.finding(
            graph,
            CODE,
            (
                f"{data['kind']} {module or name} in {data.get('dtype')} has {listed}: not multiples of {m}, "
                f"so tensor cores cannot tile it fully"
            ),
            node=name,
            module=module,
            price=price,
            evidence={k: v for k, v in bad} | {"multiple": m, "dtype": data.get("dtype")},
        )
