"""Recompute the achieved shares of archlint/devices/achieved.py from a real GPU trace.

The trace: /work/shared/traces/a100_alexnet_inference.json.gz (HolisticTraceAnalysis test data,
MIT; AlexNet inference, float32, on an A100 SXM 40 GB: 108 SMs, 1,555 GB/s, 19.5 TFLOP/s fp32,
156 TFLOP/s TF32). It records kernel names, grids and durations but no tensor shapes: the batch
is read from conv1's grid (3,025 tiles of 128 rows = batch · 55 · 55 output pixels → 128), and
each kernel is matched to its AlexNet layer by order and by its grid (an element-wise kernel's
grid × block × items per thread = the tensor's elements). Every kernel of the two recorded
forward passes is used; the shares printed are what achieved.py holds.

    python benchmarks/trace_calibration.py [--trace PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archlint.model.estimating.estimate import Gemm, tile_efficiency  # noqa: E402

TRACE = Path("/work/shared/traces/a100_alexnet_inference.json.gz")
A100 = {"bandwidth": 1555e9, "fp32": 19.5e12, "tf32": 156e12, "sms": 108}
BATCH = 128
F32 = 4
# AlexNet (torchvision): conv outputs (channels, side) and the convs' (cin, cout, k, out side)
CONV_OUT = {1: (64, 55), 2: (192, 27), 3: (384, 13), 4: (256, 13), 5: (256, 13)}
CONVS = {1: (3, 64, 11, 55), 3: (192, 384, 3, 13), 4: (384, 256, 3, 13), 5: (256, 256, 3, 13)}
POOL_OUT = {1: (64, 27), 2: (192, 13)}
LINEARS = [(9216, 4096), (4096, 4096), (4096, 1000)]


def kernels(path: Path) -> list[dict]:
    data = json.loads(gzip.open(path).read())
    events = data["traceEvents"] if isinstance(data, dict) else data
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def family(name: str) -> str | None:
    for pattern, fam in (
        (r"scudnn_128x64", "conv1"),
        (r"implicit_gemm.*tf32", "tf32-conv"),
        (r"CUDAFunctor_add", "bias-add"),
        (r"launch_clamp_scalar", "relu"),
        (r"max_pool_forward", "maxpool"),
        (r"sgemm_32x32", "sgemm"),
    ):
        if re.search(pattern, name):
            return fam
    return None


def conv_flops(cin: int, cout: int, k: int, side: int) -> int:
    return 2 * BATCH * cout * side * side * cin * k * k


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", type=Path, default=TRACE)
    args = p.parse_args()
    seen: dict[str, int] = {}
    rows: dict[str, list[float]] = {}
    for k in kernels(args.trace):
        fam = family(k["name"])
        if fam is None:
            continue
        i = seen[fam] = seen.get(fam, 0) + 1
        us = k["dur"] * 1e-6
        if fam == "conv1":
            flops = conv_flops(*CONVS[1])
            rows.setdefault("cuda-core (conv1, fp32)", []).append(flops / us / A100["fp32"])
        elif fam == "tf32-conv":
            layer = 3 + (i - 1) % 3
            cin, cout, kk, side = CONVS[layer]
            flops = conv_flops(cin, cout, kk, side)
            eff = tile_efficiency(Gemm(m=BATCH * side * side, n=cout, k=cin * kk * kk), (128, 128, 32), A100["sms"])
            rows.setdefault("tensor-gemm (conv3-5, TF32, ÷ tile/wave)", []).append(flops / us / A100["tf32"] / eff)
        elif fam in ("bias-add", "relu"):
            elements = k["args"]["grid"][0] * k["args"]["block"][0] * (2 if fam == "bias-add" else 4)
            layer = next((n for n, (c, s) in CONV_OUT.items() if BATCH * c * s * s == elements), None)
            if layer is None or (layer in (4, 5) and fam == "relu"):
                continue  # conv4/5's ReLU reads the 22 MB the add just wrote from the 40 MB L2: not a DRAM figure
            share = 2 * elements * F32 / us / A100["bandwidth"]
            rows.setdefault("stream (ReLU, vectorized)" if fam == "relu" else "broadcast (bias add)", []).append(share)
        elif fam == "maxpool":
            layer = 1 + (i - 1) % 3
            if layer not in POOL_OUT:
                continue
            c_in, s_in = CONV_OUT[layer]
            c, s = POOL_OUT[layer]
            moved = BATCH * (c_in * s_in * s_in + c * s * s) * F32
            rows.setdefault("window (max-pool 3x3/2)", []).append(moved / us / A100["bandwidth"])
        elif fam == "sgemm":
            fin, fout = LINEARS[(i - 1) % 3]
            rows.setdefault("cuda-core (SGEMM, m = 128)", []).append(2 * BATCH * fin * fout / us / A100["fp32"])
    for name, shares in rows.items():
        print(
            f"{name:42s} n={len(shares)}  {', '.join(f'{s:.0%}' for s in shares)}  "
            f"mean {sum(shares) / len(shares):.0%}  range {min(shares):.0%}-{max(shares):.0%}"
        )
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
