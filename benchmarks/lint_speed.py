"""Code-linter throughput: archlint versus TorchFix (the libcst-based PyTorch linter) on one corpus.

Corpus: every .py file of the installed torchvision package plus tests/fixtures/code. Both tools
are run through their command lines on the same explicit file list, from a scratch directory
(so archlint's cache lands there), with their default rule sets. Prints files/second for each,
single-process (-j 1) and parallel (-j N), archlint's cached re-run, and the ratios against the
targets (archlint single-process ≥ 2× TorchFix single-process; cached ≥ 10× faster than cold).

Then the project-wide cache: a 200-file project (the fixture projects of tests/fixtures/code/projects,
copied into packages, plus torchvision modules), linted once to fill the cache; one file is touched
and the project linted again: it reports how many files were re-extracted (target: 1), how many
were linted again in their new project context, and the time of that re-run.

    python benchmarks/lint_speed.py [--repeat 1] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus() -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("torchvision")  # locating the package does not import it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torchvision is not installed: pip install torchvision")
    tv = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(str(p) for p in tv.rglob("*.py"))
    files += sorted(str(p) for p in (ROOT / "tests" / "fixtures" / "code").glob("*.py"))
    return files


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: str, repeat: int) -> tuple[tuple[float, float], subprocess.CompletedProcess]:
    """((wall, cpu) seconds of the fastest of `repeat` runs, its process). CPU = user + sys, workers included."""
    best, proc = (float("inf"), 0.0), None
    for _ in range(repeat):
        cpu0, start = _children_cpu(), time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        best = min(best, (time.perf_counter() - start, _children_cpu() - cpu0))
    return best, proc


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest is kept")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel workers")
    args = p.parse_args()

    files = corpus()
    n = len(files)
    torch_files = sum(1 for f in files if "torch" in Path(f).read_text(errors="replace"))
    print(f"corpus: {n} files ({torch_files} mention torch); parallel runs use -j {args.jobs}; "
          f"best of {args.repeat}; {os.cpu_count()} CPUs on this machine")
    work = tempfile.mkdtemp(prefix="archlint-bench-")
    archlint = [sys.executable, "-m", "archlint", "--exit-zero", "--output-format", "json"]
    torchfix = [sys.executable, "-m", "torchfix"]
    rows = {}
    try:
        rows["TorchFix, -j 1"], tf = timed([*torchfix, "-j", "1", *files], work, args.repeat)
        rows[f"TorchFix, -j {args.jobs}"], _ = timed([*torchfix, "-j", str(args.jobs), *files], work,
                                                      args.repeat)
        rows["archlint, -j 1, no cache"], al = timed([*archlint, "--no-cache", "-j", "1", *files], work,
                                                     args.repeat)
        rows[f"archlint, -j {args.jobs}, no cache"], _ = timed(
            [*archlint, "--no-cache", "-j", str(args.jobs), *files], work, args.repeat)
        cold = (float("inf"), 0.0)
        for _ in range(args.repeat):  # cold run that fills the cache, then the re-run that reads it
            shutil.rmtree(Path(work) / ".archlint_cache", ignore_errors=True)
            t, _ = timed([*archlint, "-j", str(args.jobs), *files], work, 1)
            cold = min(cold, t)
        rows[f"archlint, -j {args.jobs}, cold (fills cache)"] = cold
        rows["archlint, cached re-run"], cached = timed([*archlint, *files], work, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if al.returncode != 0 or cached.returncode != 0:
        sys.exit(f"archlint failed: {al.stderr or cached.stderr}")
    import json

    findings = len(json.loads(al.stdout)["diagnostics"])
    assert len(json.loads(cached.stdout)["diagnostics"]) == findings, "cached run differs from cold run"
    tf_findings = sum(1 for line in tf.stdout.splitlines() if ": TOR" in line)

    print(f"\n{'run':<40} {'wall s':>8} {'files/s':>9} {'CPU s':>8}")
    for name, (wall, cpu) in rows.items():
        print(f"{name:<40} {wall:8.2f} {n / wall:9.1f} {cpu:8.2f}")
    single = rows["TorchFix, -j 1"][0] / rows["archlint, -j 1, no cache"][0]
    parallel = rows[f"TorchFix, -j {args.jobs}"][0] / rows[f"archlint, -j {args.jobs}, no cache"][0]
    cache = rows[f"archlint, -j {args.jobs}, cold (fills cache)"][0] / rows["archlint, cached re-run"][0]
    print(f"\nfindings: archlint {findings}, TorchFix {tf_findings} (different rule sets)")
    print(f"archlint vs TorchFix, single-process: {single:.2f}x  (target >= 2x: {'met' if single >= 2 else 'NOT met'})")
    print(f"archlint vs TorchFix, parallel:       {parallel:.2f}x")
    print(f"cached re-run vs cold:                {cache:.1f}x  (target >= 10x: {'met' if cache >= 10 else 'NOT met'})")
    cpu_single = rows["TorchFix, -j 1"][1] / rows["archlint, -j 1, no cache"][1]
    print(f"archlint vs TorchFix, single-process CPU time: {cpu_single:.2f}x (less sensitive to other load)")
    print("files/s = corpus files / wall seconds, startup included; wall times suffer from other load on a "
          "shared machine, CPU times less so")


def touched_project(files: list[str], jobs: int, size: int = 200) -> None:
    """Cached re-run after touching one file of a `size`-file project (in-process, so the counts of
    re-extracted and re-linted files can be read)."""
    sys.path.insert(0, str(ROOT))
    from archlint.code import lint
    from archlint.code.discover import discover
    from archlint.config import Settings

    work = Path(tempfile.mkdtemp(prefix="archlint-project-"))
    try:
        projects = ROOT / "tests" / "fixtures" / "code" / "projects"
        for folder in sorted(p for p in projects.iterdir() if p.is_dir()):
            shutil.copytree(folder, work / folder.name, ignore=shutil.ignore_patterns("expected.txt"))
        count = sum(1 for _ in work.rglob("*.py"))
        filler = work / "vendored"
        filler.mkdir()
        for f in files:
            if count >= size:
                break
            if f.endswith(".py") and "torchvision" in f:
                shutil.copy(f, filler / f"m{count}_{Path(f).name}")
                count += 1
        settings = Settings(root=work, jobs=jobs)
        start = time.perf_counter()
        run = lint.lint_paths([work], settings)
        cold, n = run.diagnostics, run.files_checked
        cold_s = time.perf_counter() - start
        touched = work / "trainer_class" / "src" / "seg" / "trainer.py"
        touched.write_text(touched.read_text().replace('loss.item())', 'loss.detach())'))
        start = time.perf_counter()
        linted = lint.lint_files(discover([work]), settings, [work])
        warm_s = time.perf_counter() - start
        again = lint.selected(linted.diagnostics, settings)
        extracted, relinted = linted.extracted, linted.relinted
        wall, _ = timed([sys.executable, "-m", "archlint", "--exit-zero", str(work)], str(work), 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nproject of {n} files: cold run {cold_s:.2f} s ({len(cold)} findings); after touching one file: "
          f"{extracted} re-extracted (target 1: {'met' if extracted == 1 else 'NOT met'}), {relinted} re-linted "
          f"in context, {warm_s:.2f} s in-process, {wall[0]:.2f} s through the command line "
          f"(startup included); {len(again)} findings")


if __name__ == "__main__":
    main()
    touched_project(corpus(), len(os.sched_getaffinity(0)))
