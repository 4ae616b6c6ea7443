"""The long fuzzing run of the code linter (tests/code/test_fuzz.py is its bounded version):
hypothesis-generated programs and mutated training scripts, in batches through the CLI with -j 2,
including the expensive cases near the nesting limits. Prints batches, files, findings by kind,
seconds per file, and stops at the first failure with the failing batch saved for a rerun.

    python benchmarks/lint_fuzz.py [--examples 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "code")]

from fuzzing import batches, check_batch  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=300, help="batches of 8-12 files")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    stats: Counter = Counter()
    work = Path(tempfile.mkdtemp(prefix="archlint-fuzz-"))
    os.chdir(work)  # no pyproject.toml above: default settings, paths as given

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(files=batches(heavy=True))
    def run(files):
        folder = work / f"batch{stats['batches']}"
        check_batch(folder, files)
        shutil.rmtree(folder)  # kept only when the check failed
        stats["batches"] += 1
        stats["files"] += len(files)

    start = time.perf_counter()
    try:
        run()
    finally:
        seconds = time.perf_counter() - start
        print(
            f"{stats['batches']} batches, {stats['files']} files in {seconds:.0f} s "
            f"({seconds / max(stats['files'], 1) * 1000:.0f} ms per file, each linted twice: -j 2 and alone)"
        )
        print(f"work folder (failing batches stay): {work}")
    shutil.rmtree(work)  # nothing failed: nothing to keep
    print("no internal error; every file's findings matched its solo run; no AL000 error on code CPython compiles")


if __name__ == "__main__":
    main()
