"""Code-linter speed, in one run: archlint now, archlint before issue 31's work, and TorchFix.

Issue 31 asks that the linter's speed and memory stay unchanged or better while it learns more
dataflow. This script runs three command lines over the same corpus, interleaved round by round
(so a burst of load from another process falls on all three alike), each `-j 1`:

  before    archlint at BEFORE (the commit before issue 31's first change), extracted with
            `git archive` into a temporary folder and run from there with its own PYTHONPATH;
  now       archlint from this checkout;
  TorchFix  the libcst-based PyTorch linter (pip install torchfix), its default rules.

archlint runs cold (`--no-cache`) and warm (the cache filled once, then read on every run; each
version has its own cache folder). Both versions import from cached bytecode, as an installed
package does (see pythonpath). Each run is a fresh process measured by os.wait4: CPU time
(user + system, the figure compared: steadier than wall time on a shared machine), wall time and
peak RSS. Prints medians over --repeat runs and, for the ratios now/before and now/TorchFix, the
median of the rounds' ratios with their range (below 1 means now is faster or smaller).

Corpus (--corpus): `eval`, the 32 held-out training projects of benchmarks/eval_data (real
training-code layouts, ~140 files); `torchvision`, the installed torchvision package (library
code, 185 files; TorchFix takes ~150 s of CPU per run on it); or folders/files given by path.

Then, unless --no-project, the project-wide cache of archlint now: a 200-file project linted once
to fill the cache, one file touched, the project linted again: how many files were re-extracted
(target: 1) and re-linted in their new project context.

    python benchmarks/lint_speed.py [--repeat 3] [--corpus eval] [--before REV] [--no-torchfix]

(from the checkout's root or anywhere else: every run starts in a scratch folder.)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The parent of 5a1da65 ("code_recall: round 4 ...", the first commit of issue 31's branch h31,
# merged in 2fee8b0); its archlint/ and rules/ are those of 2935d67's parent, the first code change.
BEFORE = "76ea99b"
EVAL = ROOT / "benchmarks" / "eval_data" / "training_projects"
PYCACHE = Path(tempfile.gettempdir()) / "archlint-bench-pycache"  # kept between runs, like an install's


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    rc: int
    stdout: str
    stderr: str


def measure(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> Run:
    """One fresh process: wall, CPU (user + system, its workers included) and peak RSS of the
    largest process in its tree, from os.wait4 (this process's own usage never mixes in)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        return Run(
            wall,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024,
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def extract(rev: str, into: Path) -> Path:
    """archlint/, rules/ and pyproject.toml at `rev`, unpacked under `into` (the rule pages are
    read at run time, so the package alone would not run)."""
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "archlint", "rules", "pyproject.toml"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into


def pythonpath(tree: Path) -> dict[str, str]:
    """The environment that runs archlint from `tree`, its bytecode cached as an installed package's
    is: under a scratch folder (PYTHONPYCACHEPREFIX, so the checkout stays clean),
    even where PYTHONDONTWRITEBYTECODE is set (it was on the machine these figures come from, and
    made every run compile archlint's source: a third of a warm run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": str(PYCACHE)}


def imported_from(tree: Path, cwd: Path) -> str:
    """Where `import archlint` lands with PYTHONPATH=tree, run from `cwd` as the measured runs are
    (a check that the editable install of another checkout does not shadow it). Never from the
    folder this script was started in: `python -c` puts that folder first on sys.path, so from the
    checkout's root every tree would import the checkout's archlint."""
    return subprocess.run(
        [sys.executable, "-c", "import archlint; print(archlint.__file__)"],
        cwd=cwd,
        env=pythonpath(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def corpus(choice: list[str]) -> list[str]:
    paths = []
    for item in choice:
        if item == "eval":
            paths.append(str(EVAL))
        elif item == "torchvision":
            import importlib.util

            spec = importlib.util.find_spec("torchvision")  # locating the package does not import it
            if spec is None or not spec.submodule_search_locations:
                sys.exit("torchvision is not installed: pip install torchvision")
            paths.append(next(iter(spec.submodule_search_locations)))
        else:
            paths.append(str(Path(item).resolve()))
    return paths


def python_files(paths: list[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def findings(run: Run) -> int:
    if run.rc not in (0, 1):
        sys.exit(f"archlint failed (exit {run.rc}): {run.stderr.strip()[-800:]}")
    return len(json.loads(run.stdout)["diagnostics"])


def median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    p.add_argument("--corpus", nargs="+", default=["eval"], help="eval, torchvision, or paths")
    p.add_argument("--before", default=BEFORE, help=f"the revision to compare against (default {BEFORE})")
    p.add_argument("--no-torchfix", action="store_true", help="leave TorchFix out")
    p.add_argument("--no-project", action="store_true", help="skip the touched-project cache check")
    args = p.parse_args()

    paths = corpus(args.corpus)
    files = python_files(paths)
    size = sum(f.stat().st_size for f in files) / 1e6
    torch_files = sum(1 for f in files if "torch" in f.read_text(errors="replace"))
    work = Path(tempfile.mkdtemp(prefix="archlint-speed-"))
    try:
        trees = {"before": extract(args.before, work / "before-tree"), "now": ROOT}
        for name, tree in trees.items():
            landed = imported_from(tree, work)
            if not landed.startswith(str(tree)):
                sys.exit(f"archlint {name} imports from {landed}, not {tree}")
        print(
            f"corpus: {', '.join(args.corpus)}: {len(files)} .py files, {size:.2f} MB ({torch_files} mention "
            f"torch); before = {args.before}, now = this checkout; -j 1; median of {args.repeat}; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start"
        )
        archlint = [sys.executable, "-m", "archlint", "--exit-zero", "--output-format", "json", "-j", "1"]
        runs: dict[str, list[Run]] = {}
        cwd = {}
        for name in trees:
            cwd[name] = work / f"run-{name}"
            cwd[name].mkdir()
        tools = [
            (f"{name}, cold (--no-cache)", [*archlint, "--no-cache", *paths], pythonpath(tree), cwd[name])
            for name, tree in trees.items()
        ]
        if not args.no_torchfix:
            tools.append(("TorchFix", [sys.executable, "-m", "torchfix", "-j", "1", *paths], None, work))
        for name, tree in trees.items():  # fill each version's cache (.archlint_cache in its folder) once
            findings(measure([*archlint, *paths], str(cwd[name]), pythonpath(tree)))
        tools += [
            (f"{name}, warm (cache read)", [*archlint, *paths], pythonpath(tree), cwd[name])
            for name, tree in trees.items()
        ]
        for _ in range(args.repeat):
            for label, cmd, env, where in tools:
                runs.setdefault(label, []).append(measure(cmd, str(where), env))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    counts = {}
    for label, rs in runs.items():
        if label == "TorchFix":
            if rs[-1].rc not in (0, 1):
                sys.exit(f"TorchFix failed (exit {rs[-1].rc}): {rs[-1].stderr.strip()[-800:]}")
            counts[label] = sum(1 for line in rs[-1].stdout.splitlines() if ": TOR" in line)
        else:
            counts[label] = {findings(r) for r in rs}
            if len(counts[label]) != 1:
                sys.exit(f"{label}: the runs disagree on the findings ({sorted(counts[label])})")
            counts[label] = counts[label].pop()
    for name in trees:
        cold, warm = counts[f"{name}, cold (--no-cache)"], counts[f"{name}, warm (cache read)"]
        if cold != warm:
            sys.exit(f"archlint {name}: the cached run differs from the cold run ({warm} vs {cold} findings)")

    print(f"\n{'run':<28} {'CPU s':>8} {'wall s':>8} {'files/CPU s':>12} {'peak RSS MB':>12} {'findings':>9}")
    for label, rs in runs.items():
        cpu = median(rs, "cpu")
        print(
            f"{label:<28} {cpu:8.2f} {median(rs, 'wall'):8.2f} {len(files) / cpu:12.1f} "
            f"{median(rs, 'rss_mb'):12.1f} {counts[label]:9d}"
        )
    print(
        "(medians over the runs; findings: archlint's include info, TorchFix's are its TOR lines; the rule sets differ)"
    )

    def ratio(a: str, b: str, field: str) -> tuple[float, float, float]:
        """(median, lowest, highest) of the per-round ratios a/b: the rounds are interleaved, so a
        round's two runs share the machine's load, which a ratio of the medians would not cancel."""
        per = sorted(getattr(x, field) / getattr(y, field) for x, y in zip(runs[a], runs[b]))
        return statistics.median(per), per[0], per[-1]

    def said(r: tuple[float, float, float]) -> str:
        return f"{r[0]:.3f} (rounds {r[1]:.2f}-{r[2]:.2f})"

    print("\nratios, median of the rounds' (below 1: now is faster / smaller)")
    for mode in ("cold (--no-cache)", "warm (cache read)"):
        cpu, rss = ratio(f"now, {mode}", f"before, {mode}", "cpu"), ratio(f"now, {mode}", f"before, {mode}", "rss_mb")
        verdict = "unchanged or better" if cpu[0] <= 1.05 and rss[0] <= 1.05 else "WORSE"
        print(f"  now/before, {mode:<18} CPU {said(cpu)}  peak RSS {said(rss)}  ({verdict}; 5% counted as noise)")
    if "TorchFix" in runs:
        for mode in ("cold (--no-cache)", "warm (cache read)"):
            cpu = ratio(f"now, {mode}", "TorchFix", "cpu")
            print(
                f"  now/TorchFix, {mode:<16} CPU {said(cpu)} ({1 / cpu[0]:.1f}x faster)  peak RSS "
                f"{said(ratio(f'now, {mode}', 'TorchFix', 'rss_mb'))}"
            )
        single = 1 / ratio("now, cold (--no-cache)", "TorchFix", "cpu")[0]
        print(f"  target: archlint cold >= 2x TorchFix in CPU: {'met' if single >= 2 else 'NOT met'}")
    cache = ratio("now, cold (--no-cache)", "now, warm (cache read)", "cpu")[0]
    print(
        f"  warm cache vs cold, now: {cache:.1f}x less CPU (target >= 10x: {'met' if cache >= 10 else 'NOT met'}; "
        "the warm run's CPU is mostly interpreter start-up and imports)"
    )
    if not args.no_project:
        touched_project(python_files(corpus(["torchvision"])))


def touched_project(files: list[Path], size: int = 200) -> None:
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
            shutil.copy(f, filler / f"m{count}_{f.name}")
            count += 1
        settings = Settings(root=work, jobs=1)
        start = time.perf_counter()
        run = lint.lint_paths([work], settings)
        cold, n = run.diagnostics, run.files_checked
        cold_s = time.perf_counter() - start
        touched = work / "trainer_class" / "src" / "seg" / "trainer.py"
        touched.write_text(touched.read_text().replace("loss.item())", "loss.detach())"))
        start = time.perf_counter()
        linted = lint.lint_files(discover([work]), settings, [work])
        warm_s = time.perf_counter() - start
        again = lint.selected(linted.diagnostics, settings)
        extracted, relinted = linted.extracted, linted.relinted
        cli = measure([sys.executable, "-m", "archlint", "--exit-zero", str(work)], str(work), pythonpath(ROOT))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\nproject of {n} files (now): cold run {cold_s:.2f} s ({len(cold)} findings); after touching one "
        f"file: {extracted} re-extracted (target 1: {'met' if extracted == 1 else 'NOT met'}), {relinted} "
        f"re-linted in context, {warm_s:.2f} s in-process, {cli.wall:.2f} s wall / {cli.cpu:.2f} s CPU through "
        f"the command line (start-up included); {len(again)} findings"
    )


if __name__ == "__main__":
    main()
