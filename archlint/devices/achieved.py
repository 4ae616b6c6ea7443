"""What real kernels reach of the datasheet roofs: the shares the device-spec estimate applies.

A datasheet gives peaks; kernels reach a share of them that depends on the kind of kernel. Each
share here is measured, not fitted: kernel times read from a real GPU trace
(/work/shared/traces/a100_alexnet_inference.json.gz, HolisticTraceAnalysis test data: AlexNet,
batch 128, float32, on an A100 SXM 40 GB, 1,555 GB/s, 108 SMs; `benchmarks/trace_calibration.py`
recomputes every figure from the trace) or published kernel-level benchmarks, each named. `low`
and `high` are the spread of those measurements: the estimate's range comes from them. The
shares are taken to hold on other NVIDIA GPUs of the same kind (cuDNN/cuBLAS tensor-core
kernels, PyTorch's TensorIterator element-wise kernels): an assumption the estimate states.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Share:
    name: str
    value: float  # the mid value the estimate uses
    low: float  # the lowest measured share: the slow end of the range
    high: float  # the highest: the fast end
    source: str


_TRACE = "A100 trace (AlexNet b128 fp32, HTA test data)"

SHARES = {
    s.name: s
    for s in (
        Share(
            "tensor-gemm",
            0.79,
            0.75,
            0.83,
            f"{_TRACE}: cuDNN TF32 implicit-GEMM convs conv3-conv5 (6 kernels) reach 62-70% of the "
            "156 TFLOP/s peak; divided by their tile/wave efficiency (0.94, 0.78, 0.78): 75-83%, mean 79%",
        ),
        Share(
            "attention",
            0.615,
            0.50,
            0.73,
            "FlashAttention-2 (Dao 2023, arXiv 2307.08691), abstract: fused attention reaches 50-73% "
            "of the theoretical maximum FLOP/s on A100",
        ),
        Share(
            "cuda-core",
            0.89,
            0.55,
            0.89,
            f"{_TRACE}: cuDNN fp32 conv1 (scudnn 128x64) 89% of the 19.5 TFLOP/s peak; "
            "cuBLAS fp32 SGEMMs of the classifier (m = 128, 6 kernels) 55-61%",
        ),
        Share(
            "stream",
            0.86,
            0.84,
            0.89,
            f"{_TRACE}: in-place ReLU (clamp, vectorized element-wise kernel) after conv1-conv3, tensors "
            "not held in L2, 6 kernels: 84-89% of DRAM bandwidth, mean 86%",
        ),
        Share(
            "broadcast",
            0.66,
            0.63,
            0.68,
            f"{_TRACE}: conv bias add (element-wise kernel with a broadcast operand), 10 kernels: "
            "63-68% of DRAM bandwidth, mean 66%",
        ),
        Share(
            "window",
            0.47,
            0.46,
            0.49,
            f"{_TRACE}: max-pool 3x3/2 (NCHW), 4 kernels: 46-49% of DRAM bandwidth, mean 47%; "
            "used for every sliding-window op on the CUDA cores (pools, depthwise convs)",
        ),
        Share(
            "depthwise-wide",
            0.041,
            0.040,
            0.042,
            "H200 microbenchmarks (benchmarks/conv_families.py, 2026-11-26, torch 2.11, float16 NCHW, batch 256, "
            "benchmarks/eval_data/measured/h200-conv-families-2026-11-26.json): depthwise 7×7 convs, C32@112 to "
            "C384@14, 2.7-2.8 TFLOP/s: 4.0-4.2% of the 66.9 TFLOP/s float32 CUDA-core peak",
        ),
    )
}


def shares_for(spec) -> dict[str, Share]:
    """The shares an estimate on `spec` applies: the spec's own measured [achieved] shares where
    it gives them (with the spec's source), else the built-in ones above."""
    own = getattr(spec, "achieved", None) or {}
    source = getattr(spec, "sources", {}).get("achieved", "")
    return {
        name: replace(s, value=own[name][0], low=own[name][1], high=own[name][2], source=f"{spec.name}: {source}")
        if name in own
        else s
        for name, s in SHARES.items()
    }
