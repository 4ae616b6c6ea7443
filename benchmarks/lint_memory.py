"""Code-linter cost per MB of source: peak memory and time for one file of 0.1, 1, 5 and 20 MB.

Each file is ordinary training code (a block of a train step, a loader, a model, repeated with
fresh names), linted alone through the command line (`-j 1 --no-cache`) with the size limit raised
so the numbers are real. Peak RSS is the child's own (ru_maxrss), less a baseline run on a tiny
file (interpreter and imports); time is the child's CPU time (user + system), steadier than wall
time on a shared machine. Prints MB and CPU seconds per MB of source for each size and the
fitted slope; a size whose predicted peak exceeds the memory available is skipped, and says so.

    python benchmarks/lint_memory.py [--sizes 0.1,1,5,20]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCK = '''

class Net{i}(torch.nn.Module):
    def __init__(self, width={w}):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, width, 3, padding=1)
        self.fc = torch.nn.Linear(width, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(self.conv(x), 1), 1))


def train_{i}(model, dataset, epochs={e}):
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.{i})
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"epoch {{epoch}} loss {{loss.item():.3f}}")
    return {{"weights": model.state_dict(), "steps": [epoch, {i}, "{i}"]}}
'''

PROBE = ("import resource, sys\nfrom archlint.cli import main\nrc = main(sys.argv[1:])\n"
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)\n")


def source(megabytes: float) -> str:
    parts, size, i = ["import torch\n"], 0, 0
    while size < megabytes * 1e6:
        block = BLOCK.format(i=i, w=16 + i % 48, e=1 + i % 9)
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)


def lint(path: Path) -> tuple[float, float, int]:
    """(peak MB, CPU seconds, findings) for linting one file in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", PROBE, str(path), "-j", "1", "--no-cache", "--max-file-size", "1000",
            "--output-format", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(args, env=env, capture_output=True, text=True, cwd=path.parent)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the child, not wall time: steady on a shared machine
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if run.returncode not in (0, 1):
        sys.exit(f"archlint failed on {path.name}: {run.stderr.strip()[-500:]}")
    import json

    findings = len(json.loads(run.stdout)["diagnostics"])
    return int(run.stderr.strip().splitlines()[-1]) / 1024, seconds, findings


def available_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("inf")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="0.1,1,5,20", help="file sizes in MB, comma-separated")
    sizes = [float(s) for s in p.parse_args().sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny.py"
        tiny.write_text(source(0.001))
        base_mb, base_s, _ = lint(tiny)
        print(f"baseline (interpreter, imports, {tiny.stat().st_size} B file): {base_mb:.0f} MB, {base_s:.2f} s")
        print(f"{'size MB':>8} {'peak MB':>9} {'MB/MB':>7} {'CPU s':>8} {'s/MB':>7} {'findings':>9}")
        for mb in sizes:
            path = Path(tmp) / f"gen_{mb:g}mb.py"
            path.write_text(source(mb))
            real_mb = path.stat().st_size / 1e6
            if rows:
                slope = max(r[2] for r in rows)
                need = base_mb + slope * real_mb * 1.2
                if need > available_mb():
                    print(f"{real_mb:8.2f}  skipped: needs ≈ {need / 1024:.1f} GB at {slope:.0f} MB/MB, "
                          f"{available_mb() / 1024:.1f} GB available")
                    path.unlink()
                    continue
            peak, seconds, findings = lint(path)
            path.unlink()
            extra = max(peak - base_mb, 0.0)
            rows.append((real_mb, extra, extra / real_mb, seconds - base_s, findings))
            print(f"{real_mb:8.2f} {peak:9.0f} {extra / real_mb:7.0f} {seconds:8.1f} "
                  f"{(seconds - base_s) / real_mb:7.1f} {findings:9d}")
    if len(rows) >= 2:
        n = len(rows)
        mx = sum(r[0] for r in rows) / n
        for label, k in (("memory", 1), ("time", 3)):
            my = sum(r[k] for r in rows) / n
            slope = sum((r[0] - mx) * (r[k] - my) for r in rows) / sum((r[0] - mx) ** 2 for r in rows)
            goal = " (goal: < 100, linear)" if k == 1 else ""
            print(f"fitted {label} slope: {slope:.0f} {'MB of RAM' if k == 1 else 'CPU s'} per MB of source{goal}")
        ratios = [r[2] for r in rows]
        print(f"linearity: MB/MB ranges {min(ratios):.0f}-{max(ratios):.0f} across sizes "
              f"({max(ratios) / min(ratios):.2f}x)")


if __name__ == "__main__":
    main()
