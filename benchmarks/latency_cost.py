"""What does `--latency` cost in wall time, on a quiet machine and on a busy one? One run, CPU.

For each model (torchvision's resnet18 and resnet50, weights=None, input 1×3×224×224) and each
condition, one whole `archlint MODEL --latency -q` process is timed against one plain process that
imports torch and torchvision, builds the same model and runs the passes `--latency`'s own
measurement runs (its per-op replay and the model's forward, interleaved: ⌈warmup/2⌉ warm-up
passes of each and `repeat` timed passes of each). Printed: both wall times and their ratio
(goal: ≤ 3× in both conditions), with the 1-minute load average when each pair started.

Conditions: `quiet` (nothing started beside it; the machine may still run other work: read the
load average) and `busy` (BURNERS spawned CPU-burning processes beside both runs, as a shared CI
runner has). The roofline peaks are calibrated before the first run, so no run pays for that.

    python benchmarks/latency_cost.py [--models resnet18,resnet50] [--conditions quiet,busy]
        [--burners 2] [--warmup 10] [--repeat 50] [-- EXTRA ARCHLINT ARGS]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS_FILE = "from torchvision.models import resnet18, resnet50  # weights=None by default\n"

PLAIN = """
import sys, time, torch, torchvision
name, passes = sys.argv[1], int(sys.argv[2])
model = getattr(torchvision.models, name)(weights=None).eval()
x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    for _ in range(passes):
        t = time.perf_counter_ns()
        model(x)
"""


def burn() -> None:  # a busy neighbour: one core's worth of pure-Python work
    while True:
        pass


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: findings; anything else is a failed run, not a figure
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return took


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet18,resnet50")
    p.add_argument("--conditions", default="quiet,busy")
    p.add_argument("--burners", type=int, default=2)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("extra", nargs="*", help="more archlint arguments (after --)")
    a = p.parse_args()
    passes = 2 * (math.ceil(a.warmup / 2) + a.repeat)
    subprocess.run([sys.executable, "-m", "archlint", "calibrate"], capture_output=True, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp, "models.py")
        models.write_text(MODELS_FILE)
        print(f"{'model':10} {'condition':9} {'load':>5} {'archlint s':>10} {'plain s':>8} {'ratio':>6}")
        ratios = []
        for condition in a.conditions.split(","):
            burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(a.burners)]
            if condition == "busy":
                for b in burners:
                    b.start()
                time.sleep(2)  # let the scheduler see them
            try:
                for name in a.models.split(","):
                    load = os.getloadavg()[0]
                    archlint = wall(
                        [
                            sys.executable,
                            "-m",
                            "archlint",
                            f"{models}:{name}",
                            "--input-shape",
                            "1,3,224,224",
                            "--latency",
                            "-q",
                            "--warmup",
                            str(a.warmup),
                            "--repeat",
                            str(a.repeat),
                            *a.extra,
                        ]
                    )
                    plain = wall([sys.executable, "-c", PLAIN, name, str(passes)])
                    ratios.append(archlint / plain)
                    print(
                        f"{name:10} {condition:9} {load:5.1f} {archlint:10.1f} {plain:8.1f} {archlint / plain:5.2f}×",
                        flush=True,
                    )
            finally:
                for b in burners:
                    if b.is_alive():
                        b.terminate()
                        b.join()
        print(
            f"worst ratio {max(ratios):.2f}× (goal ≤ 3×); plain = import + build + {passes} passes; "
            f"{os.cpu_count()} cores"
        )


if __name__ == "__main__":
    main()
