"""Is archlint's measured latency consistent, and what does measuring cost? One run, CPU.

For each model and batch size, RUNS times in turn: a plain script (imports torch, builds the model,
runs the same warm-up + repeats of its forward pass and reports their median), then one
`archlint --latency` process. Printed:
  (a) the sum of the per-op latencies against the end-to-end latency (target: within ±10%),
      as sum-of-medians / end-to-end (the JSON's figures), the median over the runs;
  (b) the run-to-run spread of archlint's end-to-end figure: coefficient of variation over the
      RUNS processes (target: ≤ 5%); beside it the same for the plain script's median, run in
      turn with archlint: the machine's own noise floor, which no timer can go under;
  (c) archlint's wall time against warm-up + repeats of the plain forward pass (target: ≤ 2×),
      three ways, each the median over the paired runs:
        --latency ÷ loop:  what --latency adds (the wall time of `archlint --latency` minus that of
                           the same `archlint` without it, run once per row) over the plain loop;
        ÷ plain process:   the whole `archlint --latency` process over the whole plain script;
        whole ÷ loop:      the whole process over the forward loop alone (start-up included:
                           importing torch and torchvision takes ~6 s on this machine).

    python benchmarks/latency_consistency.py [--runs 5] [--warmup 10] [--repeat 50]
        [--models resnet18,mobilenet_v2,vit_b_16] [--batches 1,8] [--threads N]

Models are torchvision's, built with weights=None (nothing downloads). The roofline peaks are
calibrated once before the first run (`archlint calibrate`), so no run pays for that. CPU
timings depend on what else the machine runs: the load average is printed with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS_FILE = "from torchvision.models import mobilenet_v2, resnet18, vit_b_16  # weights=None by default\n"

PLAIN = """
import statistics, sys, time, torch, torchvision
name, batch, warmup, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model = getattr(torchvision.models, name)(weights=None).eval()
x = torch.randn(batch, 3, 224, 224)
passes = []
with torch.no_grad():
    start = time.perf_counter()
    for _ in range(warmup + repeat):
        t = time.perf_counter_ns()
        model(x)
        passes.append((time.perf_counter_ns() - t) / 1e6)
    loop = time.perf_counter() - start
print(loop, statistics.median(passes[warmup:]))
"""


def run(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return wall, done.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--models", default="resnet18,mobilenet_v2,vit_b_16")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--threads", type=int, help="OMP_NUM_THREADS for every process (default: torch's choice)")
    a = p.parse_args()
    if a.threads:
        os.environ["OMP_NUM_THREADS"] = str(a.threads)  # before torch is imported; children inherit it

    import torch

    print(
        f"CPU: {os.cpu_count()} cores, torch {torch.__version__} with {torch.get_num_threads()} threads; "
        f"{a.runs} archlint runs per row, --warmup {a.warmup} --repeat {a.repeat}"
    )
    subprocess.run([sys.executable, "-m", "archlint", "calibrate"], check=True, capture_output=True)
    workdir = Path(tempfile.mkdtemp(prefix="archlint-bench-"))
    (workdir / "tv.py").write_text(MODELS_FILE)

    header = (
        f"{'model':<13}{'batch':>5}{'e2e ms':>9}{'(a) sum/e2e':>12}{'(b) CV':>8}{'plain CV':>9}"
        f"{'loop s':>8}{'(c) --latency÷loop':>19}{'÷plain process':>15}{'whole÷loop':>11}{'load':>6}"
    )
    print(header)
    rows = []
    out = workdir / "latency_consistency.json"
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            target = [
                sys.executable,
                "-m",
                "archlint",
                f"{workdir / 'tv.py'}:{name}",
                "--input-shape",
                f"{batch},3,224,224",
            ]
            static_wall, _ = run([*target, "--exit-zero"])  # the same analysis without --latency
            e2e, ratios, plain_ms, loops, added, per_process, whole = [], [], [], [], [], [], []
            notes = set()
            for _ in range(a.runs):
                plain_wall, out = run([sys.executable, "-c", PLAIN, name, str(batch), str(a.warmup), str(a.repeat)])
                loop, median_ms = map(float, out.split())
                wall, out = run(
                    [
                        *target,
                        "--latency",
                        "--warmup",
                        str(a.warmup),
                        "--repeat",
                        str(a.repeat),
                        "--output-format",
                        "json",
                        "--exit-zero",
                    ]
                )
                model = json.loads(out)["models"][0]
                t = model["totals"]
                e2e.append(t["latency_ms"])
                ratios.append(t["latency_ms_sum_of_ops"] / t["latency_ms"])
                plain_ms.append(median_ms)
                loops.append(loop)
                added.append((wall - static_wall) / loop)
                per_process.append(wall / plain_wall)
                whole.append(wall / loop)
                notes.update(n for n in model["notes"] if any(k in n for k in ("busy", "vari", "peak allows")))
            row = {
                "model": name,
                "batch": batch,
                "e2e_ms": statistics.median(e2e),
                "e2e_runs_ms": e2e,
                "plain_runs_ms": plain_ms,
                "sum_over_e2e": statistics.median(ratios),
                "cv": _cv(e2e),
                "plain_cv": _cv(plain_ms),
                "loop_s": statistics.median(loops),
                "static_s": static_wall,
                "latency_over_loop": statistics.median(added),
                "over_plain_process": statistics.median(per_process),
                "whole_over_loop": statistics.median(whole),
                "load": os.getloadavg()[0],
                "notes": sorted(notes),
            }
            rows.append(row)
            out.write_text(json.dumps(rows, indent=1))  # after every row: an interrupted run keeps what it measured
            print(
                f"{name:<13}{batch:>5}{row['e2e_ms']:>9.2f}{row['sum_over_e2e']:>12.3f}{row['cv']:>8.1%}"
                f"{row['plain_cv']:>9.1%}{row['loop_s']:>8.1f}{row['latency_over_loop']:>18.2f}×"
                f"{row['over_plain_process']:>14.2f}×{row['whole_over_loop']:>10.2f}×{row['load']:>6.1f}",
                flush=True,
            )
    print(f"targets: (a) 0.90–1.10, (b) ≤ 5%, (c) ≤ 2×. Rows as JSON (every run's figures and notes): {out}")
    for row in rows:
        for note in row["notes"]:
            print(f"  {row['model']} b{row['batch']}: {note}")


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


if __name__ == "__main__":
    main()
