"""Is archlint's measured latency consistent, and what does measuring cost? One run, CPU.

For each model and batch size:
  (a) the sum of the per-op latencies against the end-to-end latency (target: within ±10%);
      printed as sum-of-medians / end-to-end (the JSON's figures), the median over the runs;
  (b) the run-to-run spread of the end-to-end figure: coefficient of variation over RUNS separate
      `archlint --latency` processes (target: ≤ 5%);
  (c) the wall time of one `archlint --latency` process against a plain script that imports
      torch, builds the same model and runs the same warm-up + repeats of its forward pass
      (target: ≤ 2×); also against the forward loop alone, the strictest reading.

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
import sys, time, torch, torchvision
name, batch, warmup, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model = getattr(torchvision.models, name)(weights=None).eval()
x = torch.randn(batch, 3, 224, 224)
with torch.no_grad():
    start = time.perf_counter()
    for _ in range(warmup + repeat):
        model(x)
    print(time.perf_counter() - start)
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
        f"{'model':<13}{'batch':>5}{'e2e ms':>10}{'(a) sum/e2e':>13}{'(b) CV':>9}"
        f"{'archlint s':>12}{'plain s':>9}{'loop s':>9}{'(c) ×plain':>12}{'×loop':>7}{'load':>6}"
    )
    print(header)
    rows = []
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            plain_wall, out = run([sys.executable, "-c", PLAIN, name, str(batch), str(a.warmup), str(a.repeat)])
            loop = float(out)
            e2e, ratios, walls, notes = [], [], [], set()
            for _ in range(a.runs):
                wall, out = run(
                    [
                        sys.executable, "-m", "archlint", f"{workdir / 'tv.py'}:{name}",
                        "--input-shape", f"{batch},3,224,224", "--latency", "--warmup", str(a.warmup),
                        "--repeat", str(a.repeat), "--output-format", "json", "--exit-zero",
                    ]
                )
                model = json.loads(out)["models"][0]
                t = model["totals"]
                e2e.append(t["latency_ms"])
                ratios.append(t["latency_ms_sum_of_ops"] / t["latency_ms"])
                walls.append(wall)
                notes.update(n for n in model["notes"] if "busy" in n or "vary" in n)
            cv = statistics.stdev(e2e) / statistics.mean(e2e)
            row = {
                "model": name, "batch": batch, "e2e_ms": statistics.median(e2e), "e2e_runs_ms": e2e,
                "sum_over_e2e": statistics.median(ratios), "cv": cv, "archlint_s": statistics.median(walls),
                "plain_s": plain_wall, "loop_s": loop, "load": os.getloadavg()[0], "notes": sorted(notes),
            }
            rows.append(row)
            print(
                f"{name:<13}{batch:>5}{row['e2e_ms']:>10.2f}{row['sum_over_e2e']:>13.3f}{cv:>9.1%}"
                f"{row['archlint_s']:>12.1f}{plain_wall:>9.1f}{loop:>9.1f}"
                f"{row['archlint_s'] / plain_wall:>11.2f}×{row['archlint_s'] / loop:>6.2f}×{row['load']:>6.1f}",
                flush=True,
            )
    out = workdir / "latency_consistency.json"
    out.write_text(json.dumps(rows, indent=1))
    print(f"targets: (a) 0.90–1.10, (b) ≤ 5%, (c) ≤ 2×. Rows as JSON (with every run's e2e and the notes): {out}")
    for row in rows:
        for note in row["notes"]:
            print(f"  {row['model']} b{row['batch']}: {note}")


if __name__ == "__main__":
    main()
