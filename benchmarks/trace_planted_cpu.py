"""Planted problems in CPU-only torch.profiler traces: is each one found, and does its predicted
saving match the measured one once fixed?

    python benchmarks/trace_planted_cpu.py [--out DIR]

Records small training loops on this CPU with torch.profiler (schedule(wait=1, warmup=1,
active=4), so the priced steps are steady state), each with one planted problem and its fix:

- loader:  a DataLoader without workers over a dataset whose items take 2 ms to "decode"
           (time.sleep: the GIL is released as in real image decoding); fixed: the number of
           workers AL501 says keep pace.
- .item() of the loss every step: on a CPU tensor it synchronises nothing, which the report must
  not call a GPU sync (item calls: gpu 0).

Runs `archlint trace` on each trace (the problem's and the fix's) and prints the findings, the
predicted saving of the planted problem's finding, and the measured saving (step time of the
problem's trace minus the fix's). Two shared cores: timings are noisy to a few percent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import sys, time
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torch.profiler import profile, ProfilerActivity, schedule

torch.set_num_threads(1)

class Slow(Dataset):
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        time.sleep(0.002)  # a slow decode, GIL released
        return torch.randn(64), i % 4

def main(out, workers, item):
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Slow(), batch_size=8, num_workers=workers, persistent_workers=workers > 0)
    sched = schedule(wait=1, warmup=1, active=4, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if item:
                loss.item()
            prof.step()
            if i == 6:
                break
    prof.export_chrome_trace(out)

main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1")
"""


def record(folder: Path, name: str, workers: int, item: bool) -> Path:
    script = folder / "train_planted.py"
    script.write_text(SCRIPT)
    out = folder / f"{name}.json"
    subprocess.run([sys.executable, str(script), str(out), str(workers), "1" if item else "0"], check=True)
    return out


def lint(path: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", "trace", str(path), "--output-format", "json", "--exit-zero", "--show-info"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(proc.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="keep the traces in this folder")
    a = p.parse_args()
    folder = a.out or Path(tempfile.mkdtemp(prefix="planted_"))
    folder.mkdir(parents=True, exist_ok=True)
    docs = {"loader": lint(record(folder, "loader", 0, True))}
    al501 = next((d for d in docs["loader"]["diagnostics"] if d["code"] == "AL501"), None)
    workers = al501["evidence"]["workers_to_keep_pace"] if al501 else 2
    docs["loader_fixed"] = lint(record(folder, "loader_fixed", workers, True))  # the fix, as advised
    for name, doc in docs.items():
        t = doc["traces"][0]
        wf = t["waterfall"]
        print(
            f"{name}: step {wf['step_us'] / 1e3:.2f} ms over {wf['windows']} steady steps; "
            f"findings: {[d['code'] for d in doc['diagnostics']] or '-'}; item calls {t['evidence'].get('item_calls')}"
        )
        for d in doc["diagnostics"]:
            price = d.get("price") or {}
            print(f"   {d['code']}: {d['message'][:150]}  saves {price.get('saving_ms')}")
    before = docs["loader"]["traces"][0]["waterfall"]["step_us"]
    after = docs["loader_fixed"]["traces"][0]["waterfall"]["step_us"]
    predicted = al501["price"]["saving_ms"] if al501 else 0.0
    print(
        f"AL501 predicted saving {predicted:.2f} ms per step; measured {(before - after) / 1e3:.2f} ms "
        f"(step {before / 1e3:.2f} → {after / 1e3:.2f} ms with num_workers={workers}, as advised)"
    )


if __name__ == "__main__":
    main()
