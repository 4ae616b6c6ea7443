"""How well does `--device-spec` rank and size latency? One run, on this CPU.

For each torchvision classification model (weights=None) and batch size, in one process:
archlint's analysis with `--latency` (measured end to end on this CPU) and `--device-spec` set to
a CPU spec describing this machine (benchmarks/this_cpu_1thread.toml: figures from lscpu and two
microbenchmarks, see its [sources]). Printed: Spearman ρ between estimated and measured latency
over all rows (goal ≥ 0.95), the median and the spread of estimated / measured, and beside them
the rank correlation that FLOPs alone and MAC alone reach. Rows are saved as JSON after every
row (--out), so a run cut short still leaves its figures; --resume skips rows already there.

    python benchmarks/estimate_accuracy.py [--batches 1,8] [--models a,b] [--limit N]
        [--threads 1] [--warmup 3] [--repeat 10] [--spec FILE] [--out FILE]
    python benchmarks/estimate_accuracy.py --overhead     what --device-spec adds to resnet50's analysis
    python benchmarks/estimate_accuracy.py --published [--sample tune|heldout|fresh|both|all] [--tables GLOB]
        timm's published GPU throughput tables (benchmarks/eval_data/published/): per table,
        Spearman ρ, median error and share within 2× of the estimate, before (the roofline alone)
        and after (with the calibrated terms), beside FLOPs alone. Captures are cached in
        $ARCHLINT_BENCH_CACHE (default /tmp/archlint-published) so a second run only estimates.

CPU timings depend on what else the machine runs: the load average is printed with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
MODELS = (
    "alexnet resnet18 resnet34 resnet50 resnet101 resnext50_32x4d wide_resnet50_2 "
    "mobilenet_v2 mobilenet_v3_small mobilenet_v3_large shufflenet_v2_x0_5 shufflenet_v2_x1_0 "
    "shufflenet_v2_x1_5 shufflenet_v2_x2_0 squeezenet1_0 squeezenet1_1 mnasnet0_5 mnasnet0_75 "
    "mnasnet1_0 mnasnet1_3 efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3 "
    "efficientnet_v2_s regnet_x_400mf regnet_x_800mf regnet_x_1_6gf regnet_x_3_2gf regnet_y_400mf "
    "regnet_y_800mf regnet_y_1_6gf regnet_y_3_2gf densenet121 densenet169 googlenet vgg11 "
    "convnext_tiny swin_t vit_b_32 resnet152 maxvit_t"
).split()


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties averaged."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5


def row(name: str, batch: int, models_file: Path, spec: Path, args) -> dict:
    from archlint.config import ModelSpec, Settings
    from archlint.model.analyze import analyze

    side = 299 if name == "inception_v3" else 224
    settings = Settings(latency=True, warmup=args.warmup, repeat=args.repeat, device_spec=str(spec))
    settings.select = ["AL0"]  # the checks are not what is measured here
    model = ModelSpec(target=f"{models_file}:{name}", input_shapes=[[batch, 3, side, side]])
    start = time.perf_counter()
    result, _ = analyze(model, settings)
    return {
        "model": name,
        "batch": batch,
        "measured_ms": result.totals.latency_ms,
        "estimated_ms": result.estimate.latency_ms,
        "flops": result.totals.flops,
        "mac_bytes": result.totals.mac_bytes,
        "load": os.getloadavg()[0],
        "wall_s": time.perf_counter() - start,
    }


def summary(rows: list[dict]) -> None:
    rows = [r for r in rows if r.get("measured_ms") and r.get("estimated_ms")]
    if len(rows) < 3:
        print("too few rows for a correlation")
        return
    measured = [r["measured_ms"] for r in rows]
    ratios = sorted(r["estimated_ms"] / r["measured_ms"] for r in rows)
    print(
        f"\n{len(rows)} rows ({len({r['model'] for r in rows})} models × batches {sorted({r['batch'] for r in rows})})"
    )
    print(
        f"  Spearman ρ, estimate vs measured:   {spearman([r['estimated_ms'] for r in rows], measured):.3f}   (goal ≥ 0.95)"
    )
    print(f"  Spearman ρ, FLOPs alone:            {spearman([r['flops'] for r in rows], measured):.3f}")
    print(f"  Spearman ρ, MAC alone:              {spearman([r['mac_bytes'] for r in rows], measured):.3f}")
    q = statistics.quantiles(ratios, n=4)
    print(
        f"  estimated / measured: median {statistics.median(ratios):.2f}, quartiles {q[0]:.2f}–{q[2]:.2f}, "
        f"range {ratios[0]:.2f}–{ratios[-1]:.2f}"
    )
    for batch in sorted({r["batch"] for r in rows}):
        sub = [r for r in rows if r["batch"] == batch]
        if len(sub) >= 3:
            m = [r["measured_ms"] for r in sub]
            print(
                f"  batch {batch}: ρ {spearman([r['estimated_ms'] for r in sub], m):.3f} "
                f"(FLOPs {spearman([r['flops'] for r in sub], m):.3f}, MAC {spearman([r['mac_bytes'] for r in sub], m):.3f}), "
                f"median ratio {statistics.median(r['estimated_ms'] / r['measured_ms'] for r in sub):.2f}"
            )


def overhead(models_file: Path, spec: Path, runs: int = 5) -> None:
    """What --device-spec adds to the analysis of resnet50 (batch 1, no latency): the median over
    `runs` interleaved pairs of in-process analyses, and the estimate step timed on its own."""
    from archlint.config import ModelSpec, Settings
    from archlint.devices import resolve
    from archlint.model.analyze import analyze, analyze_model
    from archlint.model.estimating.estimate import estimate_graph

    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):
        for with_spec in (False, True):
            settings = Settings(device_spec=str(spec) if with_spec else None)
            settings.select = ["AL0"]
            start = time.perf_counter()
            analyze(ModelSpec(target=f"{models_file}:resnet50", input_shapes=[[1, 3, 224, 224]]), settings)
            times[with_spec].append(time.perf_counter() - start)
    import torch
    import torchvision

    graph, _ = analyze_model(torchvision.models.resnet50(), (torch.randn(1, 3, 224, 224),))
    device = resolve(str(spec))
    start = time.perf_counter()
    for _ in range(20):
        estimate_graph(graph, device)
    step = (time.perf_counter() - start) / 20
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"resnet50 analysis: {without * 1e3:.0f} ms without --device-spec, {with_ * 1e3:.0f} ms with "
        f"(+{(with_ / without - 1):.1%}, median of {runs} interleaved pairs; noisy machine); "
        f"the estimate step alone {step * 1e3:.1f} ms = {step / without:.1%} of the analysis (goal < 10%)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="1,8")
    p.add_argument("--models", help="comma-separated torchvision builders (default: the 42 listed here)")
    p.add_argument("--limit", type=int, help="only the first N models")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--spec", type=Path, default=HERE / "this_cpu_1thread.toml")
    p.add_argument("--out", type=Path, default=Path("estimate_accuracy.json"))
    p.add_argument("--resume", action="store_true", help="keep the rows already in --out")
    p.add_argument("--overhead", action="store_true", help="only time what --device-spec adds to resnet50's analysis")
    p.add_argument("--published", action="store_true", help="compare against timm's published GPU tables")
    p.add_argument("--sample", choices=("tune", "heldout", "fresh", "both", "all"), default="both")
    p.add_argument("--tables", default="*.csv", help="glob of published tables (benchmarks/eval_data/published/)")
    p.add_argument("--per-model", action="store_true", help="print each model's estimate against the table")
    args = p.parse_args()
    if args.published:
        from published_accuracy import run_published  # beside this file

        return run_published(args)

    import torch

    torch.set_num_threads(args.threads)
    names = args.models.split(",") if args.models else list(MODELS)
    names = names[: args.limit] if args.limit else names
    rows = json.loads(args.out.read_text()) if args.resume and args.out.exists() else []
    done = {(r["model"], r["batch"]) for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        models_file = Path(tmp) / "tv_models.py"
        models_file.write_text("from torchvision.models import *  # builders; weights=None by default\n")
        if args.overhead:
            overhead(models_file, args.spec)
            return 0
        for batch in [int(b) for b in args.batches.split(",")]:
            for name in names:
                if (name, batch) in done:
                    continue
                try:
                    r = row(name, batch, models_file, args.spec, args)
                except Exception as exc:  # one model's failure costs only its row; said here
                    print(f"{name} batch {batch}: failed ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
                    continue
                rows.append(r)
                args.out.write_text(json.dumps(rows, indent=1))
                print(
                    f"{name:22s} b{batch:<3d} measured {r['measured_ms']:9.2f} ms  estimated {r['estimated_ms']:9.2f} ms  "
                    f"ratio {r['estimated_ms'] / r['measured_ms']:5.2f}  load {r['load']:.1f}",
                    flush=True,
                )
    summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
