"""`archlint trace`: time and peak memory against the size of the input, for the shapes that were
quadratic or unbounded before issue 38 (and the ordinary one), to show each is linear.

    python benchmarks/trace_scaling.py [--quick]

Each measurement runs in a fresh process and reports wall time and that process's peak resident
memory (ru_maxrss; the interpreter with archlint imported is ~20 MB of it). Shapes:

- events:  Kineto-like training traces (benchmarks/trace_speed.py's generator) of growing size,
           read, analysed and checked (`lint_trace`);
- steps:   traces of many short steps, the whole command with its text report (the per-step table
           is summarised past 40 steps; JSON keeps every step);
- name:    one python_function event whose name repeats "DataLoader" (a backtracking pattern once
           made this quadratic: 345 KB, 21 s);
- gzip:    a .json.gz holding one string of N million characters (the reader stops at 64 MB with a
           one-line error; once 300M characters took 392 s and 2.1 GB).

Linear: the time per MB (or per 1,000 steps) stays flat as the size doubles.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from trace_speed import write_synthetic  # noqa: E402

CHILD = """
import contextlib, io, json, os, resource, sys, time
from pathlib import Path
start = time.perf_counter()
if sys.argv[1] == "lint":
    from archlint.config import Settings
    from archlint.trace.command import lint_trace
    lint_trace(Path(sys.argv[2]), Settings())
    code = 0
else:
    from archlint import cli
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli.main(["trace", sys.argv[2]])
print(json.dumps({"s": time.perf_counter() - start, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "code": code}))
"""


def measure(mode: str, path: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def steps_trace(path: Path, n: int) -> None:
    """n steps of 1 ms, each one kernel launched at its start."""
    with open(path, "w") as f:
        f.write(
            '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], "traceEvents": ['
        )
        for i in range(n):
            s = 1_000_000.0 + i * 1000
            f.write(
                ("," if i else "")
                + json.dumps(
                    [
                        {
                            "ph": "X",
                            "cat": "user_annotation",
                            "name": f"ProfilerStep#{i}",
                            "pid": 1,
                            "tid": 1,
                            "ts": s,
                            "dur": 1000,
                        },
                        {
                            "ph": "X",
                            "cat": "cuda_runtime",
                            "name": "cudaLaunchKernel",
                            "pid": 1,
                            "tid": 1,
                            "ts": s + 5,
                            "dur": 4,
                            "args": {"correlation": i},
                        },
                        {
                            "ph": "X",
                            "cat": "kernel",
                            "name": "ampere_sgemm_128x64_tn",
                            "pid": 0,
                            "tid": 7,
                            "ts": s + 20,
                            "dur": 700 + i % 97,
                            "args": {"stream": 7, "device": 0, "correlation": i},
                        },
                    ]
                )[1:-1]
            )
        f.write("]}")


def name_trace(path: Path, chars: int) -> None:
    doc = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "python_function",
                "name": "DataLoader" * (chars // 10),
                "pid": 1,
                "tid": 1,
                "ts": 0,
                "dur": 1,
            },
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"stream": 7}},
        ]
    }
    path.write_text(json.dumps(doc))


def gzip_string(path: Path, chars: int) -> None:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(z.compress(b'{"traceEvents": [{"name": "'))
        block = b"a" * (1 << 20)
        for _ in range(chars >> 20):
            f.write(z.compress(block))
        f.write(z.compress(b'"}]}') + z.flush())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller sizes (about a minute)")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trace_scaling_"))
    q = a.quick
    shapes = [
        (
            "events",
            "lint",
            [12.5, 25, 50, 100] if q else [25, 50, 100, 200, 400],
            "MB",
            lambda path, mb: write_synthetic(path, int(mb * 1e6)),
        ),
        ("steps", "cli", [5_000, 10_000, 20_000] if q else [10_000, 20_000, 40_000, 80_000], "k steps", steps_trace),
        (
            "name",
            "cli",
            [350_000, 1_000_000, 3_000_000] if q else [350_000, 1_000_000, 3_000_000, 10_000_000],
            "MB name",
            name_trace,
        ),
        ("gzip", "cli", [16 << 20, 32 << 20, 300 << 20], "M chars", gzip_string),
    ]
    print(f"{'shape':<8}{'size':>14}{'file MB':>10}{'s':>9}{'peak MB':>9}{'s per unit':>12}  exit")
    try:
        for shape, mode, sizes, unit, make in shapes:
            for size in sizes:
                path = tmp / (f"{shape}_{size}.json" + (".gz" if shape == "gzip" else ""))
                make(path, size)
                r = measure(mode, path)
                units = {"MB": size, "k steps": size / 1000, "MB name": size / 1e6, "M chars": size / 2**20}[unit]
                shown = f"{units:g} {unit}"
                if "error" in r:
                    print(f"{shape:<8}{shown:>14}  error: {r['error']}")
                else:
                    rate = r["s"] / units if shape != "gzip" else r["s"] / min(units, 64)
                    print(
                        f"{shape:<8}{shown:>14}{path.stat().st_size / 1e6:>10.2f}{r['s']:>9.2f}{r['rss_mb']:>9.0f}"
                        f"{rate:>12.4f}  {r['code']}",
                        flush=True,
                    )
                path.unlink()
    finally:
        for leftover in tmp.iterdir():
            leftover.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
