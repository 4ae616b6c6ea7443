"""The training step's time on a device spec, and its MFU, from the forward estimate's machinery.

The forward is archlint.model.estimating.estimate's own estimate of the graph. The backward is each op's
backward kernels (its `backward_terms`: grad_input, grad_weight, ... one kernel each) estimated
by the same per-op function, `estimate_op`, on the op's shapes with the kernel's FLOPs and bytes
(the recompute of fused attention runs inside the grad_input kernel). The loss and the optimizer
are element-wise kernels; the optimizer's launches (one per tensor unless foreach or fused) each
pay the spec's launch overhead. MFU = 2 × (forward + backward multiply-adds) / (step time ×
the device's dense peak for the dtype), the usual model-FLOPs utilisation.
"""

from __future__ import annotations

import networkx as nx

from archlint.devices import DeviceSpec
from archlint.model.estimating.estimate import ALL_TERMS, combine, estimate_op, roofs
from archlint.train_result import TrainStep

# Terms about a forward kernel's own implementation: a backward kernel on the op's shapes has neither
# the bias add after cuDNN's conv nor the NCHW upsample's serial loop (its backward kernel is another).
BACKWARD_TERMS = ALL_TERMS - {"conv-bias", "serial-upsample"}


def _elementwise(flops: int, mac: int, itemsize: int) -> dict:
    return {
        "kind": "elementwise",
        "key": "add",
        "flops": flops,
        "mac_bytes": mac,
        "attrs": {},
        "in_shapes": [],
        "out_shapes": [],
        "itemsize": itemsize,
        "known": True,
    }


def backward_ms(graph: nx.DiGraph, spec: DeviceSpec, dtype: str) -> float:
    total = 0.0
    for _, op in graph.nodes(data=True):
        terms = op.get("backward_terms")
        if not terms:
            continue
        recompute = terms.get("recompute", {}).get("flops", 0)
        for name, t in terms.items():
            if name == "recompute":
                continue
            flops = t["flops"] + (recompute if name == "grad_input" else 0)
            kernel = (
                _elementwise(flops, t["mac_bytes"], int(op.get("itemsize", 4)))
                if name == "grad_sum"
                else {**op, "flops": flops, "mac_bytes": t["mac_bytes"]}
            )
            total += estimate_op(kernel, spec, dtype, terms=BACKWARD_TERMS).ms
    return total


def optimizer_ms(opt: dict, spec: DeviceSpec, dtype: str, itemsize: int) -> float:
    """Its kernels over all the trainable elements, the launches each paying the overhead."""
    kernels = max(1, opt["kernels_per_element"])
    one = estimate_op(_elementwise(opt["flops"] // kernels, opt["mac_bytes"] // kernels, itemsize), spec, dtype)
    kernel_s = max(one.compute_ms, one.memory_ms) / 1e3 * kernels
    return combine(kernel_s, opt["launches"] * spec.overhead_s, spec.kind == "gpu") * 1e3


def estimate_step(graph: nx.DiGraph, train: TrainStep, spec: DeviceSpec, forward_ms: float) -> dict:
    """`estimate.train`: the step's estimated time split and its MFU on `spec`; `forward_ms` is
    the forward's own estimate (models[].estimate.latency_ms)."""
    dtype = graph.graph.get("dtype", "float32")
    itemsize = 2 if dtype in ("float16", "bfloat16") else 8 if dtype == "float64" else 4
    fwd = float(forward_ms)
    bwd = backward_ms(graph, spec, dtype)
    loss = train.loss
    loss_ms = sum(
        estimate_op(_elementwise(f, m, itemsize), spec, dtype).ms
        for f, m in (
            (loss["forward_flops"], loss["forward_mac_bytes"]),
            (loss["backward_flops"], loss["backward_mac_bytes"]),
        )
        if f or m
    )
    opt = optimizer_ms(train.optimizer, spec, dtype, itemsize)
    step = fwd + bwd + loss_ms + opt
    roof = roofs(spec, dtype)
    model_flops = train.forward_flops + train.backward_flops
    mfu = 2 * model_flops / (step / 1e3 * roof["peak_flops_per_s"]) if step > 0 else None
    return {
        "forward_ms": fwd,
        "backward_ms": bwd,
        "loss_ms": loss_ms,
        "optimizer_ms": opt,
        "step_ms": step,
        "mfu": mfu,
        "peak_flops_per_s": roof["peak_flops_per_s"],
        "peak_unit": roof["unit"],
        "method": (
            "forward: the estimate above; backward: each op's gradient kernels estimated by the same per-op "
            "roofline on the op's shapes; optimizer: its element-wise kernels over the trainable parameters, "
            "each launch paying the spec's overhead; MFU = 2·(forward + backward multiply-adds) / (step time × peak)"
        ),
    }
