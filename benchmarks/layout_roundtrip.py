"""What AL113's copies cost: a channels-first LayerNorm written via permutes (torchvision's and
timm's LayerNorm2d: permute(0, 2, 3, 1) → F.layer_norm → permute(0, 3, 1, 2)) on an NCHW
activation against the same code on a channels_last one, where both permutes are free views.

    PYTHONPATH=. python benchmarks/layout_roundtrip.py [--device cpu|cuda] [--dtype float32] [--repeat 50]

Prints, per ConvNeXt-tiny stage shape (batch 8), the median time of each and their ratio, and the
bytes archlint prices the round trip at (one read + write of the activation: the copy inside
layer_norm). CPU timings on a shared machine are noisy: compare ratios, run twice.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = [(8, 96, 56, 56), (8, 192, 28, 28), (8, 384, 14, 14), (8, 768, 7, 7)]


def ln2d(x, w, b):
    return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), w, b).permute(0, 3, 1, 2)


def median_ms(fn, repeat: int, device: torch.device) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    print(
        f"LayerNorm2d via permutes, {args.dtype} on {device} (threads {torch.get_num_threads()}), median of {args.repeat}"
    )
    print(f"{'shape':>18} {'NCHW ms':>9} {'channels_last ms':>17} {'ratio':>6} {'priced copy':>12}")
    with torch.no_grad():
        for shape in SHAPES:
            x = torch.randn(*shape, device=device, dtype=dtype)
            w = torch.ones(shape[1], device=device, dtype=dtype)
            b = torch.zeros(shape[1], device=device, dtype=dtype)
            last = x.contiguous(memory_format=torch.channels_last)
            nchw = median_ms(lambda: ln2d(x, w, b), args.repeat, device)
            cl = median_ms(lambda: ln2d(last, w, b), args.repeat, device)
            copy_mib = 2 * x.numel() * x.element_size() / 2**20
            print(f"{'×'.join(map(str, shape)):>18} {nchw:9.3f} {cl:17.3f} {nchw / cl:6.2f} {copy_mib:9.1f} MiB")


if __name__ == "__main__":
    main()
