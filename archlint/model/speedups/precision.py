"""The device-spec estimate of a float32 model in 16-bit autocast, beside its float32 estimate:
the basis of AL403's price (a CUDA training loop without autocast) when the run names a GPU with
--device-spec. Same graph, same estimate (archlint.model.estimating.estimate); only the precision changes:
each float32 op's bytes halve and its GEMMs may reach the 16-bit tensor cores. The forward
(`autocast_estimate`) and, with --train, the whole training step (`autocast_step_estimate`):
AL403's loop trains, so its saving is the step's, forward and backward."""

from __future__ import annotations

import networkx as nx

from archlint.devices import DeviceSpec
from archlint.model.estimating.estimate import autocast_flow, estimate_graph, share_of
from archlint.model.train.steptime import backward_ms

_BYTES = ("in_bytes", "out_bytes", "mac_bytes", "param_bytes")


def autocast_dtype(spec: DeviceSpec) -> str:
    """bfloat16 where the spec has bf16 tensor cores (what AL403 suggests), else float16 (T4, V100)."""
    return "bfloat16" if spec.peaks.get("tensor-bf16", 0) > 0 else "float16"


def _half(graph: nx.DiGraph, dtype: str) -> nx.DiGraph:
    """A copy of the graph with each float32 op in `dtype` (its bytes and its backward kernels'
    bytes halved); the graph itself is not changed (the estimate writes into the copy)."""
    half = graph.copy()  # new attribute dicts: the estimate's per-op fields stay on the copy
    half.graph["dtype"] = dtype
    for _, op in half.nodes(data=True):
        if op.get("dtype") == "float32" and op.get("itemsize") == 4:
            op.update({k: op[k] // 2 for k in _BYTES if isinstance(op.get(k), int)}, dtype=dtype, itemsize=2)
            if op.get("backward_terms"):
                op["backward_terms"] = {
                    name: {**t, "mac_bytes": t["mac_bytes"] // 2} for name, t in op["backward_terms"].items()
                }
    return half


def autocast_estimate(graph: nx.DiGraph, spec: DeviceSpec) -> dict | None:
    """{"dtype", "latency_ms", "assumption"}: the float32 model estimated under torch.autocast
    (estimate.autocast_flow: GEMMs in 16 bits with their float32 inputs and weights cast each
    pass, autocast's float32 ops kept in float32); None on a CPU spec or for a model not in
    float32. The graph is not changed."""
    if spec.kind != "gpu" or graph.graph.get("dtype", "float32") != "float32":
        return None
    dtype = autocast_dtype(spec)
    return {
        "dtype": dtype,
        "latency_ms": estimate_graph(_half(graph, dtype), spec, autocast=True)["latency_ms"],
        "assumption": f"torch.autocast to {dtype}: GEMMs in {dtype} with their float32 inputs and weights cast each "
        "pass, autocast's float32 ops (softmax, norms, reductions) in float32",
    }


def autocast_step_estimate(graph: nx.DiGraph, spec: DeviceSpec, step: dict) -> dict | None:
    """The --train step (its float32 estimate `step`, estimate.train) under torch.autocast:
    {"dtype", "forward_ms", "backward_ms", "loss_ms", "optimizer_ms", "step_ms", "assumption"}.
    The forward as autocast_estimate; the backward is each op's gradient kernels (backward_terms)
    estimated as the step estimate does (train.steptime.backward_ms), each in the precision its
    forward ran in (the forward's autocast_flow factor on its bytes), plus the gradient of each of
    autocast's casts, a cast back of the same bytes; the loss and the optimizer as in float32
    (autocast keeps the parameters, their gradients and the optimizer state in float32). None
    where autocast_estimate is None, or for a graph whose backward was not costed."""
    if spec.kind != "gpu" or graph.graph.get("dtype", "float32") != "float32":
        return None
    if not any(op.get("backward_terms") for _, op in graph.nodes(data=True)):
        return None
    dtype = autocast_dtype(spec)
    half = _half(graph, dtype)
    forward = estimate_graph(half, spec, autocast=True)["latency_ms"]
    flow = autocast_flow(half)
    casts = 0
    for name, op in half.nodes(data=True):
        factor, cast = flow.get(name, (1.0, 0))
        if op.get("backward_terms"):
            op["backward_terms"] = {
                k: {**t, "mac_bytes": int(t["mac_bytes"] * factor)} for k, t in op["backward_terms"].items()
            }
            casts += cast
    # casts stream at the bandwidth, as estimate_op counts the forward's (no launch of their own)
    stream = spec.bandwidth * share_of("stream", None, spec)
    backward = backward_ms(half, spec, dtype) + casts / stream * 1e3
    total = forward + backward + step["loss_ms"] + step["optimizer_ms"]
    return {
        "dtype": dtype,
        "forward_ms": forward,
        "backward_ms": backward,
        "loss_ms": step["loss_ms"],
        "optimizer_ms": step["optimizer_ms"],
        "step_ms": total,
        "assumption": f"torch.autocast to {dtype} over forward and loss, backward in each op's forward precision "
        "(GEMMs in 16 bits, autocast's float32 ops in float32, each cast's gradient a cast back); "
        "parameters, gradients and optimizer state in float32 (the optimizer step unchanged)",
    }
