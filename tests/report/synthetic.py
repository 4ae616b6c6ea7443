"""RunResults made up for the report tests: a residual network of any size, with nested module
paths, real edges, and (optionally) measured latency, device roofs and findings."""

from __future__ import annotations

from archlint.diagnostics import Applicability, Diagnostic, Fix, Price, Severity
from archlint.result import GateResult, Layer, ModelResult, RunResult, Totals


def residual_net(n_ops: int, measured: bool = False, peaks: bool = False) -> ModelResult:
    """Stages of blocks (conv → norm → relu → conv → norm → add → relu), about n_ops ops."""
    layers: list[Layer] = []
    prev = "x"
    c, hw = 64, 56

    def add(name, kind, op, module, inputs, flops, mac, params=0):
        lat = (flops * 2 / 2e11 + mac / 2e10) * 1e3 * (1.4 if kind != "conv" else 1.1) if measured else None
        layer = Layer(
            name=name,
            kind=kind,
            op=op,
            module=module,
            flops=flops,
            mac_bytes=mac,
            params=params,
            out_bytes=c * hw * hw * 4,
            in_shapes=[[1, c, hw, hw]],
            out_shapes=[[1, c, hw, hw]],
            dtype="float32",
            latency_ms=lat,
            latency_spread_ms=[lat * 0.95, lat * 1.05] if lat else None,
            inputs=list(inputs),
        )
        if measured and peaks and mac:
            intensity = 2 * flops / mac
            attainable = max(2 * flops / 2e11, mac / 2e10) * 1e3
            layer.roofline = {
                "intensity": intensity,
                "bound": "compute" if intensity >= 10 else "memory",
                "attainable_ms": attainable,
                "efficiency": attainable / lat,
            }
        layers.append(layer)
        return name

    act = c * hw * hw * 4
    prev = add("conv1", "conv", "torch.nn.Conv2d", "conv1", [prev], 118_013_952, 3 * 224 * 224 * 4 + act, 9408)
    prev = add("bn1", "norm", "torch.nn.BatchNorm2d", "bn1", [prev], 0, 2 * act, 128)
    prev = add("relu", "activation", "torch.nn.ReLU", "relu", [prev], 0, 2 * act)
    prev = add("maxpool", "pool", "torch.nn.MaxPool2d", "maxpool", [prev], 0, 2 * act)
    stage, block = 1, 0
    while len(layers) < n_ops - 3:
        mod = f"layer{stage}.{block}"
        p = f"layer{stage}_{block}"
        act = c * hw * hw * 4
        conv_flops = c * c * 9 * hw * hw
        skip = prev
        x = add(
            f"{p}_conv1", "conv", "torch.nn.Conv2d", f"{mod}.conv1", [prev], conv_flops, 2 * act + c * c * 36, c * c * 9
        )
        x = add(f"{p}_bn1", "norm", "torch.nn.BatchNorm2d", f"{mod}.bn1", [x], 0, 2 * act, 2 * c)
        x = add(f"{p}_relu", "activation", "torch.nn.ReLU", f"{mod}.relu", [x], 0, 2 * act)
        x = add(
            f"{p}_conv2", "conv", "torch.nn.Conv2d", f"{mod}.conv2", [x], conv_flops, 2 * act + c * c * 36, c * c * 9
        )
        x = add(f"{p}_bn2", "norm", "torch.nn.BatchNorm2d", f"{mod}.bn2", [x], 0, 2 * act, 2 * c)
        x = add(f"{p}_add", "elementwise", "aten.add.Tensor", mod, [x, skip], 0, 3 * act)
        prev = add(f"{p}_relu_1", "activation", "torch.nn.ReLU", f"{mod}.relu", [x], 0, 2 * act)
        block += 1
        if block == 2 + stage % 3:
            stage, block = stage + 1, 0
            if stage <= 4:
                c, hw = c * 2, max(hw // 2, 7)
    prev = add("avgpool", "pool", "torch.nn.AdaptiveAvgPool2d", "avgpool", [prev], 0, c * hw * hw * 4)
    prev = add("flatten", "reshape", "torch.flatten", None, [prev], 0, 0)
    add("fc", "linear", "torch.nn.Linear", "fc", [prev], c * 1000, (c + 1000 + c * 1000) * 4, c * 1000 + 1000)
    totals = Totals(
        flops=sum(layer.flops for layer in layers),
        mac_bytes=sum(layer.mac_bytes for layer in layers),
        params=sum(layer.params for layer in layers),
        activation_bytes=sum(layer.out_bytes for layer in layers),
        latency_ms=sum(layer.latency_ms for layer in layers) * 0.97 if measured else None,
        latency_ms_sum_of_ops=sum(layer.latency_ms for layer in layers) if measured else None,
    )
    return ModelResult(
        target=f"examples/synthetic.py:Res{n_ops}",
        strategy="fx",
        device="cpu",
        dtype="float32",
        input_shapes=[[1, 3, 224, 224]],
        totals=totals,
        layers=layers,
        notes=["synthetic model made up by the report tests"],
        roofline={"device": "cpu|test CPU x2 threads|float32", "peak_flops_per_s": 2e11, "bandwidth_bytes_per_s": 2e10}
        if peaks
        else None,
        timing="per-op replay, median of 50" if measured else None,
    )


def with_findings(model: ModelResult) -> RunResult:
    """The model plus model findings (one pointing at several layers), a gate and code findings."""
    target = model.target
    names = [layer.name for layer in model.layers]
    diagnostics = [
        Diagnostic(
            code="AL101",
            message="conv in/out channels 64→256 make MAC 1.6× its lower bound",
            node="layer1_0_conv1",
            module="layer1.0.conv1",
            target=target,
            evidence={"c1": 64, "c2": 256, "mac_ratio": 1.6},
            price=Price.timed(
                "conv 128→128 (balanced, equal FLOPs)",
                saving_ms=0.41,
                model_ms=8.2,
                mac_bytes_saved=3_200_000,
                device="cpu",
            ),
        ),
        Diagnostic(
            code="AL104",
            message="element-wise ops hold 38% of the model's MAC",
            severity=Severity.INFO,
            node="layer1_0_add",
            module="layer1.0",
            target=target,
            evidence={"share": 0.38, "nodes": [n for n in names if n.endswith("_add")][:5]},
            price=Price.static(
                "element-wise ops fused into their producers", mac_bytes_saved=9_000_000, model_mac_bytes=23_700_000
            ),
        ),
        Diagnostic(
            code="AL202",
            message="ReLU applied to the output of ReLU",
            node="relu",
            module="relu",
            target=target,
            evidence={"producer": "bn1"},
            price=Price.static("the relu removed", mac_bytes_saved=800_000, model_mac_bytes=23_700_000),
        ),
    ]
    code = [
        Diagnostic(
            code="AL301",
            message="DataLoader without pin_memory=True",
            file="train.py",
            line=12,
            column=9,
            fix=Fix("add pin_memory=True", Applicability.SAFE),
        ),
        Diagnostic(code="AL302", message=".to(device) without non_blocking=True", file="train.py", line=30, column=5),
        Diagnostic(code="AL301", message="DataLoader without pin_memory=True", file="src/data.py", line=4, column=1),
    ]
    gate = [
        GateResult(target=target, check="max-flops", passed=True, message="1.82 G ≤ 2 G", actual=1.82e9, limit=2e9),
        GateResult(
            target=target, check="baseline:new-finding", passed=False, message="AL101 is new", actual=None, limit=None
        ),
    ]
    return RunResult(models=[model], diagnostics=diagnostics + code, files_checked=2, gate=gate)
