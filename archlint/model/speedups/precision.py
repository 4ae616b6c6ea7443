"""The device-spec estimate of a float32 model's forward in 16-bit autocast, beside its float32
estimate: the basis of AL403's price (a CUDA training loop without autocast) when the run names a
GPU with --device-spec. Same graph, same estimate (archlint.model.estimate); only the precision
changes: each float32 op's bytes halve and its GEMMs may reach the 16-bit tensor cores."""

from __future__ import annotations

import networkx as nx

from archlint.devices import DeviceSpec
from archlint.model.estimate import estimate_graph

_BYTES = ("in_bytes", "out_bytes", "mac_bytes", "param_bytes")


def autocast_dtype(spec: DeviceSpec) -> str:
    """bfloat16 where the spec has bf16 tensor cores (what AL403 suggests), else float16 (T4, V100)."""
    return "bfloat16" if spec.peaks.get("tensor-bf16", 0) > 0 else "float16"


def autocast_estimate(graph: nx.DiGraph, spec: DeviceSpec) -> dict | None:
    """{"dtype", "latency_ms", "assumption"}: the float32 model estimated under torch.autocast
    (estimate.autocast_flow: GEMMs in 16 bits with their float32 inputs and weights cast each
    pass, autocast's float32 ops kept in float32); None on a CPU spec or for a model not in
    float32. The graph is not changed (the estimate writes into a 16-bit copy)."""
    if spec.kind != "gpu" or graph.graph.get("dtype", "float32") != "float32":
        return None
    dtype = autocast_dtype(spec)
    half = graph.copy()  # new attribute dicts: the estimate's per-op fields stay on the copy
    half.graph["dtype"] = dtype
    for _, op in half.nodes(data=True):
        if op.get("dtype") == "float32" and op.get("itemsize") == 4:
            op.update({k: op[k] // 2 for k in _BYTES if isinstance(op.get(k), int)}, dtype=dtype, itemsize=2)
    return {
        "dtype": dtype,
        "latency_ms": estimate_graph(half, spec, autocast=True)["latency_ms"],
        "assumption": f"torch.autocast to {dtype}: GEMMs in {dtype} with their float32 inputs and weights cast each "
                      "pass, autocast's float32 ops (softmax, norms, reductions) in float32",
    }
