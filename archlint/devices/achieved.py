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

from dataclasses import dataclass


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
            "tensor-gemm", 0.79, 0.75, 0.83,
            f"{_TRACE}: cuDNN TF32 implicit-GEMM convs conv3-conv5 reach 110, 101, 97 TFLOP/s of 156 "
            "= 70%, 65%, 62% of peak; divided by their tile/wave efficiency (0.94, 0.78, 0.78) "
            "75%, 83%, 79% of what their tiles allow",
        ),
        Share(
            "attention", 0.615, 0.50, 0.73,
            "FlashAttention-2 (Dao 2023, arXiv 2307.08691), abstract: fused attention reaches 50-73% "
            "of the theoretical maximum FLOP/s on A100",
        ),
        Share(
            "cuda-core", 0.89, 0.55, 0.89,
            f"{_TRACE}: cuDNN fp32 conv1 (scudnn 128x64) 17.4 TFLOP/s of 19.5 = 89%; "
            "cuBLAS fp32 SGEMMs of the classifier (m = 128) 55-60%",
        ),
        Share(
            "stream", 0.86, 0.84, 0.88,
            f"{_TRACE}: in-place ReLU (clamp, vectorized element-wise kernel) over tensors larger than "
            "L2 moves 1.37, 1.35, 1.30 TB/s of 1.555 = 88%, 87%, 84% of DRAM bandwidth",
        ),
        Share(
            "broadcast", 0.66, 0.64, 0.68,
            f"{_TRACE}: bias add (element-wise kernel with a broadcast operand) moves 1.06, 1.05, 0.99 "
            "TB/s = 68%, 68%, 64% of DRAM bandwidth",
        ),
        Share(
            "window", 0.47, 0.46, 0.48,
            f"{_TRACE}: max-pool 3x3/2 (NCHW) moves 0.75 and 0.72 TB/s = 48%, 46% of DRAM bandwidth; "
            "used for every sliding-window op on the CUDA cores (pools, depthwise convs)",
        ),
    )
}
