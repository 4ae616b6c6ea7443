"""Code-linter cost per MB of source, in one run: archlint now, archlint before issue 31, TorchFix.

Each file is ordinary training code (a block of a train step, a loader, a model, repeated with
fresh names) of 0.1, 1, 5 and 20 MB, linted alone through each command line, `-j 1`: archlint
now (this checkout) and before issue 31's work (BEFORE in lint_speed.py, extracted with
`git archive`, run with its own PYTHONPATH), both `--no-cache` with the size limit raised so the
numbers are real, and TorchFix up to --torchfix-max MB (it takes ~70 s of CPU per MB). Peak RSS is
the process's own (os.wait4), less a baseline run of the same tool on a tiny file (interpreter and
imports); time is CPU time (user + system), steadier than wall time on a shared machine. Prints MB
of RAM and CPU seconds per MB of source for each size and tool, the ratios now/before and
now/TorchFix, and now's fitted slopes; a size whose predicted peak exceeds the memory available is
skipped, and says so.

    python benchmarks/lint_memory.py [--sizes 0.1,1,5,20] [--torchfix-max 1] [--before REV]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCK = """

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
"""


def source(megabytes: float) -> str:
    parts, size, i = ["import torch\n"], 0, 0
    while size < megabytes * 1e6:
        block = BLOCK.format(i=i, w=16 + i % 48, e=1 + i % 9)
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)


def _speed():
    """benchmarks/lint_speed.py, for its one-run helpers (imported on use: the tests load this file
    for source() alone)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import lint_speed

    return lint_speed


def _tools(work: Path, before: str):
    """(name, command for a file, environment) of each tool compared."""
    extract, pythonpath = _speed().extract, _speed().pythonpath
    archlint = [
        sys.executable,
        "-m",
        "archlint",
        "--exit-zero",
        "-j",
        "1",
        "--no-cache",
        "--max-file-size",
        "1000",
        "--output-format",
        "json",
    ]
    tree = extract(before, work / "before-tree")
    return [
        ("now", archlint, pythonpath(ROOT)),
        ("before", archlint, pythonpath(tree)),
        ("TorchFix", [sys.executable, "-m", "torchfix", "-j", "1"], None),
    ]


def lint(cmd: list[str], env, path: Path) -> tuple[float, float, int]:
    """(peak MB, CPU seconds, findings) for linting one file in a fresh process."""
    run = _speed().measure([*cmd, str(path)], str(path.parent), env)
    if run.rc not in (0, 1):
        sys.exit(f"{' '.join(cmd[:3])} failed on {path.name}: {run.stderr.strip()[-500:]}")
    if "archlint" in cmd:
        import json

        findings = len(json.loads(run.stdout)["diagnostics"])
    else:
        findings = sum(1 for line in run.stdout.splitlines() if ": TOR" in line)
    return run.rss_mb, run.cpu, findings


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
    p.add_argument("--torchfix-max", type=float, default=1.0, help="largest size TorchFix is run on, MB")
    p.add_argument("--before", default=None, help="the revision to compare against (default: lint_speed.BEFORE)")
    args = p.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        before = args.before or _speed().BEFORE
        tools = _tools(Path(tmp), before)
        tiny = Path(tmp) / "tiny.py"
        tiny.write_text(source(0.001))
        base = {name: lint(cmd, env, tiny)[:2] for name, cmd, env in tools}
        print(
            f"before = {before}, now = this checkout; baselines ({tiny.stat().st_size} B file: "
            "interpreter, imports): " + ", ".join(f"{n} {mb:.0f} MB {s:.2f} s" for n, (mb, s) in base.items())
        )
        print(f"{'size MB':>8} {'tool':>9} {'peak MB':>8} {'MB/MB':>7} {'CPU s':>8} {'s/MB':>7} {'findings':>9}")
        rows: dict[str, list] = {name: [] for name, _, _ in tools}
        for mb in sizes:
            path = Path(tmp) / f"gen_{mb:g}mb.py"
            path.write_text(source(mb))
            real_mb = path.stat().st_size / 1e6
            for name, cmd, env in tools:
                if name == "TorchFix" and mb > args.torchfix_max:
                    continue
                if rows[name]:
                    need = base[name][0] + max(r[2] for r in rows[name]) * real_mb * 1.2
                    if need > available_mb():
                        print(
                            f"{real_mb:8.2f} {name:>9}  skipped: needs ≈ {need / 1024:.1f} GB, "
                            f"{available_mb() / 1024:.1f} GB available"
                        )
                        continue
                peak, seconds, findings = lint(cmd, env, path)
                extra = max(peak - base[name][0], 0.0)
                rows[name].append((real_mb, extra, extra / real_mb, seconds - base[name][1], findings, peak, seconds))
                print(
                    f"{real_mb:8.2f} {name:>9} {peak:8.0f} {extra / real_mb:7.0f} {seconds:8.1f} "
                    f"{(seconds - base[name][1]) / real_mb:7.1f} {findings:9d}"
                )
            path.unlink()
    print("\nratios per size (peak RSS, CPU time; below 1: now is smaller / faster)")
    for other in ("before", "TorchFix"):
        pairs = {r[0]: r for r in rows[other]}
        for r in rows["now"]:
            o = pairs.get(r[0])
            if o is not None:
                print(f"  {r[0]:6.2f} MB  now/{other:<8} peak RSS {r[5] / o[5]:.3f}  CPU {r[6] / o[6]:.3f}")
    now = rows["now"]
    if len(now) >= 2:
        n = len(now)
        mx = sum(r[0] for r in now) / n
        for label, k in (("memory", 1), ("time", 3)):
            my = sum(r[k] for r in now) / n
            slope = sum((r[0] - mx) * (r[k] - my) for r in now) / sum((r[0] - mx) ** 2 for r in now)
            goal = " (goal: < 100, linear)" if k == 1 else ""
            print(f"now, fitted {label} slope: {slope:.0f} {'MB of RAM' if k == 1 else 'CPU s'} per MB of source{goal}")
        ratios = [r[2] for r in now]
        print(
            f"now, linearity: MB/MB ranges {min(ratios):.0f}-{max(ratios):.0f} across sizes "
            f"({max(ratios) / min(ratios):.2f}x)"
        )


if __name__ == "__main__":
    main()
