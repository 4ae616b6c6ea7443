"""Grouped and depthwise convs (and bilinear upsampling) on a GPU, with archlint's estimate beside them.

Two steps:
  run     (GPU) time F.conv2d in float16 at batch 256 with CUDA events (median of 10 after 3
          warm-ups, cudnn.benchmark off as in eager use): depthwise 3×3/5×5/7×7 at four sizes and a
          strided 3×3, grouped 3×3 convs of 4 to 128 channels a group, two dense references; NCHW,
          then channels_last; then ×2 bilinear upsamples in float32 and float16 (the serial loop
          over batch × channels behind torch_kernels.UPSAMPLE_ITERATION_S). Writes JSON rows.
  report  (CPU) archlint's --device-spec estimate of each NCHW row against the measured time.

The H200 rows (benchmarks/eval_data/measured/h200-conv-families-2026-11-26.json) are where the
estimate's `depthwise-wide` share and its grouped convs' `window` share come from
(archlint/devices/achieved.py, archlint/model/estimating/torch_kernels.py, archlint/model/estimating/estimate.py).

    python benchmarks/conv_families.py run OUT.json
    python benchmarks/conv_families.py report [RESULTS.json] [--spec h200]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

MEASURED = Path(__file__).parent / "eval_data" / "measured" / "h200-conv-families-2026-11-26.json"


def cases():
    for k in (3, 5, 7):
        for c, hw in ((32, 112), (96, 56), (192, 28), (384, 14)):
            yield dict(cin=c, cout=c, hw=hw, k=k, groups=c)
    yield dict(cin=96, cout=96, hw=112, k=3, stride=2, groups=96)
    for width in (4, 8, 16, 24, 32, 64, 128):
        for c, hw in ((256, 56), (512, 28)):
            if c % width == 0:
                yield dict(cin=c, cout=c, hw=hw, k=3, groups=c // width)
    for c, hw in ((64, 56), (256, 28)):
        yield dict(cin=c, cout=c, hw=hw, k=3, groups=1)


def run(out: Path, batch: int = 256) -> None:
    import torch
    import torch.nn.functional as F

    from archlint.model.timing.timer import median_ms

    torch.backends.cudnn.benchmark = False
    half, rows = torch.float16, []

    def timed(fn):
        return median_ms(fn, "cuda", repeat=10)

    for cl in (False, True):
        for c in cases():
            stride, k, g = c.get("stride", 1), c["k"], c["groups"]
            x = torch.randn(batch, c["cin"], c["hw"], c["hw"], device="cuda", dtype=half)
            w = torch.randn(c["cout"], c["cin"] // g, k, k, device="cuda", dtype=half)
            if cl:
                x, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, w))
            o = (c["hw"] + 2 * (k // 2) - k) // stride + 1
            ms = timed(lambda: F.conv2d(x, w, stride=stride, padding=k // 2, groups=g))
            rows.append(
                dict(
                    n=batch,
                    cin=c["cin"],
                    cout=c["cout"],
                    hw=c["hw"],
                    k=k,
                    stride=stride,
                    groups=g,
                    cl=cl,
                    ms=ms,
                    macs=batch * c["cout"] * o * o * (c["cin"] // g) * k * k,
                    bytes=2 * (x.numel() + w.numel() + batch * c["cout"] * o * o),
                )
            )
    for dtype in (torch.float32, torch.float16):  # float32: what torch.autocast runs upsampling in
        for n, c, hw in ((64, 512, 7), (32, 256, 28), (8, 64, 112)):
            x = torch.randn(n, c, hw, hw, device="cuda", dtype=dtype)
            ms = timed(lambda: F.interpolate(x, scale_factor=2, mode="bilinear"))
            rows.append(
                dict(
                    op="upsample_bilinear2d",
                    n=n,
                    c=c,
                    hw=hw,
                    scale=2,
                    dtype=str(dtype).removeprefix("torch."),
                    ms=ms,
                    sms=torch.cuda.get_device_properties(0).multi_processor_count,
                )
            )
    env = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "dtype": "float16",
        "timer": "CUDA events, median of 10 after 3 warm-ups",
        "cudnn_benchmark": False,
    }
    out.write_text(json.dumps({**env, "rows": rows}, indent=0))


def op_of(r: dict) -> dict:
    n, cin, cout, hw, k, s, g = r["n"], r["cin"], r["cout"], r["hw"], r["k"], r["stride"], r["groups"]
    o = (hw + 2 * (k // 2) - k) // s + 1
    return dict(
        kind="conv",
        key="conv2d",
        in_shapes=[[n, cin, hw, hw]],
        out_shapes=[[n, cout, o, o]],
        param_shapes={"weight": [cout, cin // g, k, k]},
        attrs={"groups": g},
        flops=r["macs"],
        mac_bytes=r["bytes"],
        in_bytes=2 * n * cin * hw * hw,
        out_bytes=2 * n * cout * o * o,
        itemsize=2,
    )


def report(results: Path, spec_name: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from archlint.devices import resolve
    from archlint.model.estimating.estimate import estimate_op

    data = json.loads(results.read_text())
    spec = resolve(spec_name)
    print(f"{data.get('gpu')}: torch {data.get('torch')}, {data.get('dtype')}; estimate --device-spec {spec.name}")
    ratios = []
    for r in data["rows"]:
        if r.get("op") == "upsample_bilinear2d":  # the serial loop: ms per (batch, channel) iteration and wave
            waves = math.ceil((r["hw"] * r["scale"]) ** 2 / (r["sms"] * 2048))
            print(
                f"  bilinear ×{r['scale']} {r['n']}×{r['c']}×{r['hw']}² {r['dtype']}: {r['ms']:.3f} ms, "
                f"{r['ms'] * 1e3 / (r['n'] * r['c'] * waves):.3f} µs an iteration"
            )
            continue
        if r["cl"]:
            continue  # the estimate models NCHW (torch's default memory format)
        est = estimate_op(op_of(r), spec, "float16")
        ratios.append(est.ms / r["ms"])
        print(
            f"  {r['k']}×{r['k']}/{r['stride']} C{r['cin']:<4d} @{r['hw']:<4d} {r['cin'] // r['groups']:4d} ch/group  "
            f"measured {r['ms']:7.3f} ms  estimate {est.ms:7.3f} ms  ({ratios[-1]:.2f}×, {est.bound}, {est.share})"
        )
    spread = statistics.pstdev(math.log(x) for x in ratios)
    print(
        f"median estimate/measured {statistics.median(ratios):.2f}, within 1.5× {sum(1 / 1.5 <= x <= 1.5 for x in ratios)}/{len(ratios)}, "
        f"log spread {spread:.2f}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--batch", type=int, default=256)
    q = sub.add_parser("report")
    q.add_argument("results", type=Path, nargs="?", default=MEASURED)
    q.add_argument("--spec", default="h200")
    ns = p.parse_args()
    if ns.step == "run":
        run(ns.out, ns.batch)
    else:
        report(ns.results, ns.spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
