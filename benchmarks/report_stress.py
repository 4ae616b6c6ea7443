"""Stress the files archlint writes besides --fix (reports, HTML pages, baselines) where writes go
wrong, and count the bytes lost (the goal: 0).

    python benchmarks/report_stress.py [--trials 500] [--jobs 2] [--seed 0]

Each trial makes a fresh folder with a training script (`train.py`, one AL402 finding), an old
report, and a file outside the project (`victim`), then runs a real `archlint train.py --no-cache`
that writes one output (`-o` as json or sarif, `--html`, or `--save-baseline`) in one of six ways:

- kill:        SIGKILL at a random moment of the second half of the run (the report is written last),
               or, in half the trials, the moment its temporary file appears (mid-write);
- concurrent:  three runs writing the same report at once;
- file-limit:  a file size limit (RLIMIT_FSIZE) below the report's size: what a full disk does to
               a write (a tmpfs of a chosen size needs root; the limit fails the same write calls);
- link-swap:   at a random moment of the run the report's name becomes a symbolic link to `victim`;
- link:        the report's name is a committed symbolic link to `victim` from the start;
- input:       the output is named like an input of the run: `train.py` by another spelling, a hard
               link or a link to it, or `pyproject.toml`, the config the run reads.

Afterwards: `train.py`, `pyproject.toml` and `victim` must be byte for byte as they were, and the
report either the old one or a whole new one equal to a clean run's (never cut, empty or mixed);
a file lost or damaged counts its bytes as lost. Runs that must be refused (link, input,
file-limit) must exit 2 saying why; a run that exits 0 or 1 must have written the whole report.
Temporary files a killed run left are counted, and the next write to the folder (after their
staleness delay, simulated by ageing them) must remove them.

Each archlint run is a real process killed with a real SIGKILL, forked from this script after a
warm-up run of each output in this process (so every run has all of archlint's modules already
imported: one edited while the script runs cannot mix versions).

Measured (2026-11-28, 2 shared cores at load average ~10-20): `python benchmarks/report_stress.py
--trials 600 --jobs 2` → 0 bytes lost, 0 damaged files, 0 wrong exit codes in 600 trials (100 of
each kind), 121 s; kill: 41 runs killed mid-write (their temporary file there), all 41 temporary
files removed by the next write; concurrent: 100 of 100 whole new reports. The same trials with
`--naive` (the writer replaced by a plain `open(path, "w")`, as a report written without the one
writer): 251,565 bytes lost, 392 of 600 trials bad (file-limit 100 cut reports, link-swap 92 and
link 100 victims overwritten, input 100 inputs replaced).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archlint.cli import main as archlint_main  # noqa: E402
from archlint.writeguard import STALE_AFTER_S, TEMP_SUFFIX  # noqa: E402

KINDS = ("kill", "concurrent", "file-limit", "link-swap", "link", "input")
OUTPUTS = {  # name → the flags that write it
    "report.json": ("--output-format", "json", "-o"),
    "report.sarif": ("--output-format", "sarif", "-o"),
    "report.html": ("--html",),
    "baseline.json": ("--save-baseline",),
}
TRAIN = b"import torch\nx = torch.zeros(3).cuda()\n" + b"".join(
    b"y%d = torch.ones(%d).cuda()\n" % (i, i + 1) for i in range(40)
)
CONFIG = b'[tool.archlint]\nselect = ["AL4"]\n'
VICTIM = b"somebody's file outside the project\n" * 20
OLD = b"the previous report, whole\n" * 10


def _undated(data: bytes) -> bytes:
    """The HTML page says when it was written (to the minute): not a difference in content."""
    return re.sub(rb"written \d{4}-\d\d-\d\d \d\d:\d\d UTC", b"written <date> UTC", data)


def run_archlint(folder: Path, argv: list[str], limit: int | None = None) -> tuple[int, int]:
    """Fork a real archlint run in `folder`: (its pid, the read end of a pipe with what it says)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.dup2(write, 1)
            os.dup2(write, 2)
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            os.chdir(folder)
            code = archlint_main(["train.py", "--no-cache", "-q", "-j", "1", *argv])
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        except BaseException:
            os._exit(99)
    os.close(write)
    return pid, read


def wait(run: tuple[int, int]) -> tuple[int, str]:
    pid, read = run
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode(errors="replace")
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), said


def lay_out(folder: Path, name: str) -> None:
    for path in list(folder.iterdir()):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    (folder / "train.py").write_bytes(TRAIN)
    (folder / "pyproject.toml").write_bytes(CONFIG)
    (folder / name).write_bytes(OLD)
    (folder.parent / f"{folder.name}-victim").write_bytes(VICTIM)


def trial(kind: str, name: str, folder: Path, rng: random.Random, references: dict, run_time: float) -> dict:
    lay_out(folder, name)
    victim = folder.parent / f"{folder.name}-victim"
    report = folder / name
    flags = list(OUTPUTS[name])
    expect_refused = False
    codes = []
    if kind == "kill":
        run = run_archlint(folder, [*flags, name])
        if rng.random() < 0.5:
            time.sleep(rng.uniform(run_time * 0.5, run_time * 1.1))  # the report is written near the end
        else:  # the moment its temporary file appears: mid-write
            deadline = time.monotonic() + run_time * 4
            while time.monotonic() < deadline and not any(n.endswith(TEMP_SUFFIX) for n in os.listdir(folder)):
                pass
        with contextlib.suppress(ProcessLookupError):
            os.kill(run[0], signal.SIGKILL)
        wait(run)
    elif kind == "concurrent":
        codes = [wait(r)[0] for r in [run_archlint(folder, [*flags, name]) for _ in range(3)]]
    elif kind == "file-limit":
        expect_refused = True
        codes = [wait(run_archlint(folder, [*flags, name], limit=rng.randint(1, len(references[name]) - 1)))[0]]
    elif kind == "link-swap":
        run = run_archlint(folder, [*flags, name])
        time.sleep(rng.uniform(0, run_time * 1.2))
        with contextlib.suppress(FileNotFoundError):
            report.unlink()
        report.symlink_to(victim)
        codes = [wait(run)[0]]
    elif kind == "link":
        expect_refused = True
        report.unlink()
        report.symlink_to(victim)
        codes = [wait(run_archlint(folder, [*flags, name]))[0]]
    else:  # input
        expect_refused = True
        how = rng.choice(("spelling", "absolute", "hard link", "link", "config"))
        target = {"spelling": "./train.py", "absolute": str(folder / "train.py"), "config": "pyproject.toml"}.get(how)
        if target is None:
            target = "alias"
            (os.link if how == "hard link" else lambda src, dst: os.symlink("train.py", dst))(
                folder / "train.py", folder / target
            )
        codes = [wait(run_archlint(folder, [*flags, target]))[0]]
    lost = 0
    damaged = []
    for path, want in ((folder / "train.py", TRAIN), (folder / "pyproject.toml", CONFIG), (victim, VICTIM)):
        data = path.read_bytes() if path.exists() else b""
        if data != want:
            damaged.append(path.name)
            lost += len(want)
    if report.is_symlink():
        final = None  # the link itself: its target was checked above
    else:
        final = _undated(report.read_bytes() if report.exists() else b"")
        if final not in (OLD, references[name]):
            damaged.append(name)
            lost += len(OLD)
    wrong_exit = (expect_refused and any(c != 2 for c in codes)) or (
        kind == "concurrent" and (any(c not in (0, 1) for c in codes) or final != references[name])
    )
    strays = [p for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX)]
    cleaned = True
    if strays:  # aged past the staleness delay, the next write to the folder removes them
        old = time.time() - STALE_AFTER_S - 5
        for p in strays:
            os.utime(p, (old, old))
        with contextlib.suppress(FileNotFoundError):
            report.unlink()
        wait(run_archlint(folder, [*flags, name]))
        cleaned = not [p for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX)]
    result = {
        "kind": kind,
        "lost": lost,
        "damaged": damaged,
        "wrong_exit": wrong_exit,
        "strays": len(strays),
        "cleaned": cleaned,
        "new": final == references[name],
    }
    if damaged:
        keep = folder.parent / f"damaged-{kind}-{rng.random():.6f}"
        shutil.copytree(folder, keep, symlinks=True)
        result["kept"] = str(keep)
    return result


def _naive_writer() -> None:
    """Replace the one writer by an in-place write that follows links and checks nothing."""
    from archlint import outputs

    def write_text(path, text, what="the report"):
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)

    outputs.write_text = write_text
    outputs.guard_run = lambda settings, inputs: None


def worker(args: tuple) -> list[dict]:
    index, plan, seed, references, run_time, root = args
    rng = random.Random(seed * 1000 + index)
    folder = Path(root) / f"w{index}"
    folder.mkdir()
    return [trial(kind, name, folder, rng, references, run_time) for kind, name in plan]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--naive",
        action="store_true",
        help="write as a plain open(path, 'w') would, no checks: shows what the script catches",
    )
    args = parser.parse_args()
    if args.naive:
        _naive_writer()
    root = Path(tempfile.mkdtemp(prefix="archlint-report-stress-"))
    started = time.perf_counter()
    ref = root / "reference"
    ref.mkdir()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        for name, flags in OUTPUTS.items():  # every module a run needs, imported before the forks
            lay_out(ref, name)
            archlint_main([str(ref / "train.py"), "--no-cache", "-q", "-j", "1", *flags, str(ref / name)])
    references = {}
    for name, flags in OUTPUTS.items():  # a clean run's output: what a whole new report is
        lay_out(ref, name)
        (ref / name).unlink()
        code, said = wait(run_archlint(ref, [*flags, name]))
        assert code in (0, 1), said
        references[name] = _undated((ref / name).read_bytes())
    timing = time.perf_counter()
    for name, flags in OUTPUTS.items():
        wait(run_archlint(ref, [*flags, name]))
    run_time = (time.perf_counter() - timing) / len(OUTPUTS)
    shutil.rmtree(ref)
    rng = random.Random(args.seed)
    plan = [(KINDS[i % len(KINDS)], rng.choice(sorted(OUTPUTS))) for i in range(args.trials)]
    chunks = [(j, plan[j :: args.jobs], args.seed, references, run_time, str(root)) for j in range(args.jobs)]
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        results = [r for chunk in pool.map(worker, chunks) for r in chunk]
    elapsed = time.perf_counter() - started

    sizes = ", ".join(f"{name} {len(data) / 1024:.0f} KB" for name, data in references.items())
    print(
        f"archlint report stress: {args.trials} trials, {args.jobs} jobs, seed {args.seed}, one run ≈ "
        f"{run_time:.2f} s, {elapsed:.0f} s in all ({sizes})"
    )
    print(
        f"{'kind':<11} {'trials':>6} {'damaged':>8} {'bytes lost':>10} {'wrong exit':>10} {'new report':>10} "
        f"{'stray temps':>11} {'cleaned':>7}"
    )
    for kind in KINDS:
        rows = [r for r in results if r["kind"] == kind]
        print(
            f"{kind:<11} {len(rows):>6} {sum(bool(r['damaged']) for r in rows):>8} {sum(r['lost'] for r in rows):>10} "
            f"{sum(r['wrong_exit'] for r in rows):>10} {sum(r['new'] for r in rows):>10} "
            f"{sum(r['strays'] for r in rows):>11} {sum(r['cleaned'] for r in rows if r['strays']):>7}"
        )
    lost = sum(r["lost"] for r in results)
    bad = sum(bool(r["damaged"]) or r["wrong_exit"] or not r["cleaned"] for r in results)
    print(
        f"bytes lost: {lost}; trials with a damaged file, a wrong exit code or temporary files left: {bad} "
        f"of {len(results)} (goal 0 and 0)"
    )
    for r in results:
        if r.get("kept"):
            print(f"  kept for inspection: {r['kept']} ({', '.join(r['damaged'])})")
    if not any(r.get("kept") for r in results):
        shutil.rmtree(root, ignore_errors=True)
    return 1 if lost or bad else 0


if __name__ == "__main__":
    sys.exit(main())
