"""archlint's model analysis (no latency) against fvcore FlopCountAnalysis and torch FlopCounterMode.

    python benchmarks/analyze_speed.py [--repeat 3] [--quick]

Same prebuilt model (real weights, eval mode) and the same input for every tool; each time is the
best of --repeat runs (peers: one run on the synthetic models above 1,500 layers, where fvcore
alone takes minutes). archlint: fx trace + shape propagation on meta copies + costs (no
arithmetic on real data); fvcore: jit trace of a real forward; FlopCounterMode: a real forward
under a dispatch mode. Goal (issue 45): archlint ≤ 0.3× fvcore on the four torchvision models, in
one run, and time linear in the number of layers (the synthetic models of 1k/2k/5k layers).
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import torch
import torchvision
from torch import nn

from archlint.model.analyze import analyze_model

GOAL = 0.3  # archlint's time / fvcore's on the torchvision models (issue 45)


def synthetic(layers: int, width: int = 16) -> nn.Module:
    """A plain chain of `layers` leaf modules: Conv2d / BatchNorm2d / ReLU repeated."""
    blocks = []
    for i in range(layers):
        blocks.append((nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())[i % 3])
    return nn.Sequential(nn.Conv2d(3, width, 1), *blocks)


def best(fn, repeat: int) -> tuple[float, float]:
    """(best time, the tool's GFLOPs) over `repeat` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        flops = fn()
        times.append(time.perf_counter() - start)
    return min(times), flops / 1e9


def run_archlint(model, x):
    _, result = analyze_model(model, (x,))
    return result.totals.flops


def run_fvcore(model, x):
    from fvcore.nn import FlopCountAnalysis

    analysis = FlopCountAnalysis(model, x)
    analysis.unsupported_ops_warnings(False)
    analysis.uncalled_modules_warnings(False)
    return analysis.total()


def run_flop_counter(model, x):
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops() // 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller synthetic models (smoke test)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    models = [
        (name, getattr(torchvision.models, name)(), (1, 3, 224, 224))
        for name in ("resnet50", "vit_b_16", "densenet121", "efficientnet_b0")
    ]
    sizes = (100, 200, 500) if args.quick else (1000, 2000, 5000)
    models += [(f"synthetic-{n}", synthetic(n), (1, 3, 32, 32)) for n in sizes]

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {args.repeat}")
    print(
        f"{'model':18s} {'layers':>7s} {'archlint s':>11s} {'fvcore s':>9s} {'FlopCtr s':>10s} "
        f"{'vs fvcore':>10s} {'vs FlopCtr':>11s}  GFLOPs (archlint / fvcore / FlopCounterMode÷2)"
    )
    per_layer, against_fvcore = [], []
    for name, model, shape in models:
        model.eval()
        x = torch.randn(shape)
        layers = sum(1 for m in model.modules() if not list(m.children()))
        run_archlint(model, x)  # warm-up: imports, caches
        # fvcore's time grows faster than linearly: one run each on the largest synthetic models
        peers = 1 if layers > 1500 else args.repeat
        (ours, g0), (fv, g1), (fc, g2) = (
            best(lambda: run_archlint(model, x), args.repeat),
            best(lambda: run_fvcore(model, x), peers),
            best(lambda: run_flop_counter(model, x), peers),
        )
        g = (g0, g1, g2)
        print(
            f"{name:18s} {layers:7d} {ours:11.3f} {fv:9.3f} {fc:10.3f} {ours / fv:9.2f}× {ours / fc:10.2f}×"
            f"  {g[0]:.3f} / {g[1]:.3f} / {g[2]:.3f}"
        )
        if name.startswith("synthetic"):
            per_layer.append((layers, model, x))
        else:
            against_fvcore.append(ours / fv)
    worst = max(against_fvcore)
    print(
        f"worst archlint / fvcore on the torchvision models {worst:.2f}× (goal ≤ {GOAL:g}×): "
        f"{'met' if worst <= GOAL else 'NOT met'}"
    )

    # Scaling: archlint alone, the sizes interleaved so that every size sees the same machine load.
    best_of: dict[int, float] = {}
    for _ in range(args.repeat):
        for layers, model, x in per_layer:
            start = time.perf_counter()
            run_archlint(model, x)
            best_of[layers] = min(best_of.get(layers, float("inf")), time.perf_counter() - start)
    print(
        "\nscaling (archlint, synthetic, interleaved): "
        + ", ".join(f"{n} layers {t:.3f} s = {t * 1e3 / n:.3f} ms/layer" for n, t in best_of.items())
    )
    (n0, t0), (n1, t1) = list(best_of.items())[0], list(best_of.items())[-1]
    print(f"time ratio {t1 / t0:.2f}× for {n1 / n0:.2f}× the layers (linear: equal)")


if __name__ == "__main__":
    main()
