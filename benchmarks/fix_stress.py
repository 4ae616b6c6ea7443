"""Stress `archlint --fix` where writes go wrong, and count damaged files (the goal: 0).

    python benchmarks/fix_stress.py [--trials 1000] [--jobs 2] [--seed 0]

Each trial copies a small training script (one of three, 0.4-12 KB, with 3-5 fixable findings)
into a fresh folder and runs `archlint FILE --fix --no-cache` in one of five ways:

- kill:        SIGKILL at a random moment between start and the run's usual end;
- concurrent:  three runs on the same file at once;
- editor:      an editor saves the file (in place, or by a rename) at a random moment of the run;
- file-limit:  the run has a file size limit (RLIMIT_FSIZE) below the fixed file's size;
- full-disk:   the file lives on a small tmpfs with less free space than the fixed file needs
               (skipped, and said, where tmpfs cannot be mounted: it needs root).

Afterwards the file must be byte for byte one of the valid states: the original or what one clean
`--fix` makes of it (for `editor`: the editor's version, or the clean fix of the editor's version).
Anything else (cut, empty, mixed, an editor's save lost) is a damaged file. For file-limit and
full-disk runs the summary must not claim a fix ("Fixed 0"); a claim is counted as a false claim.

Each archlint run is a real process killed with a real SIGKILL; it is forked from this script
after archlint and libcst are imported (a warm-up --fix runs in this process first), so that a thousand trials
take minutes, not the hour that as many interpreter starts would take on a busy 2-core machine.

Measured (2026-11-25, 2 shared cores at load average ~18, root, tmpfs available):
`python benchmarks/fix_stress.py --trials 1000 --jobs 2` → 0 damaged files in 1,000 trials (200 of
each kind), 0 false claims, 359 s; kill: 19 fixed, 181 untouched, 5 stray temporary files; editor:
125 with the editor's save fixed, 75 with it as saved. The same script with `writeback.replace`
swapped for the in-place write archlint used before (`path.write_bytes`), 100 trials, seed 1:
21 damaged (file-limit 20 of 20 cut; editor 1 save lost).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archlint.cli import main as archlint_main  # noqa: E402

KINDS = ("kill", "concurrent", "editor", "file-limit", "full-disk")
SMALL = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=32, num_workers=4)
for x, y in loader:
    x = x.cuda()
    y = y.cuda()
z = torch.zeros(3).cuda()
w = torch.ones(4).cuda()
"""
TRAIN = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def train(model, dataset, device):
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for inputs, targets in loader:
            inputs = inputs.to(device)
            targets = targets.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
    scale = torch.ones(10).to(device)
    offset = torch.zeros(10).to(device)
    return scale, offset
"""
TEMPLATES = {"small": SMALL, "train": TRAIN, "padded": TRAIN + "".join(f"# note {i}: {'x' * 60}\n" for i in range(150))}
EDIT = "# saved by an editor while archlint ran\n"
TMPFS_SIZE = 64 * 1024


def run_archlint(path: Path, limit: int | None = None) -> tuple[int, int]:
    """Fork a real `archlint --fix` process on `path`: (its pid, the read end of a pipe holding its
    stdout and stderr; a pipe, so a file size limit does not apply to what it says)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one archlint run, nothing else
        try:
            os.close(read)
            os.dup2(write, 1)
            os.dup2(write, 2)
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            os.chdir(path.parent)
            code = archlint_main([path.name, "--fix", "--no-cache", "-q", "-j", "1"])
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        except BaseException:
            os._exit(99)
    os.close(write)
    return pid, read


def wait(run: tuple[int, int]) -> tuple[int, str]:
    """(exit code, what the run printed)."""
    pid, read = run
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode(errors="replace")
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), said


def clean_fix(text: str, folder: Path) -> bytes:
    """What one clean --fix makes of `text` (the reference a trial's result must equal)."""
    path = folder / "reference.py"
    path.write_text(text)
    code, said = wait(run_archlint(path))
    assert code in (0, 1), said
    data = path.read_bytes()
    compile(data, "reference.py", "exec")
    path.unlink()
    return data


def _claims_a_fix(said: str) -> bool:
    lines = [line for line in said.splitlines() if line.startswith("Fixed ")]
    return bool(lines) and not lines[-1].startswith("Fixed 0 ")


def trial(
    kind: str, name: str, folder: Path, rng: random.Random, references: dict, run_time: float, disk: Path | None
) -> dict:
    original = TEMPLATES[name].encode()
    fixed = references[name]
    where = disk if kind == "full-disk" else folder
    path = where / f"{name}.py"
    path.write_bytes(original)
    valid = {original, fixed}
    false_claim = False
    if kind == "kill":
        run = run_archlint(path)
        time.sleep(rng.uniform(0, run_time * 1.2))
        with contextlib.suppress(ProcessLookupError):
            os.kill(run[0], signal.SIGKILL)
        wait(run)
    elif kind == "concurrent":
        for run in [run_archlint(path) for _ in range(3)]:
            wait(run)
    elif kind == "editor":
        edited = original + EDIT.encode()
        valid = {edited, references[name + "+edit"]}
        run = run_archlint(path)
        time.sleep(rng.uniform(0, run_time * 1.2))
        if rng.random() < 0.5:  # in place, as many editors save
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.write(fd, edited)
            os.close(fd)
        else:  # a new file renamed over the old, as others do
            (folder / "editor.tmp").write_bytes(edited)
            os.replace(folder / "editor.tmp", path)
        wait(run)
    elif kind == "file-limit":
        limit = rng.randint(1, len(fixed) - 1)
        false_claim = _claims_a_fix(wait(run_archlint(path, limit=limit))[1])
    else:  # full-disk
        filler = disk / "filler"
        free = shutil.disk_usage(disk).free
        room = rng.randint(0, max(0, len(fixed) - 1))
        with contextlib.suppress(OSError):
            with open(filler, "wb") as f:
                f.write(b"\0" * max(0, free - room))
        false_claim = _claims_a_fix(wait(run_archlint(path))[1]) and path.read_bytes() != fixed
    data = path.read_bytes()
    strays = [p.name for p in where.iterdir() if p.name.endswith(".archlint.tmp")]
    result = {
        "kind": kind,
        "damaged": data not in valid,
        "fixed": data in (fixed, references.get(name + "+edit")),
        "false_claim": false_claim,
        "strays": len(strays),
    }
    if result["damaged"]:
        keep = folder.parent / f"damaged-{kind}-{rng.random():.6f}.py"
        keep.write_bytes(data)
        result["kept"] = str(keep)
    for p in list(where.iterdir()):
        p.unlink()
    return result


def _mount_tmpfs(folder: Path) -> str | None:
    """None when a tmpfs of TMPFS_SIZE is mounted at `folder`, else why not."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount failed: {exc}"
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}"


def worker(args: tuple) -> list[dict]:
    index, plan, seed, references, run_time, root = args
    rng = random.Random(seed * 1000 + index)
    folder = Path(root) / f"w{index}"
    folder.mkdir()
    disk = Path(root) / f"disk{index}"
    skipped = _mount_tmpfs(disk) if "full-disk" in {k for k, _ in plan} else None
    results = []
    try:
        for kind, name in plan:
            if kind == "full-disk" and skipped:
                results.append({"kind": kind, "skipped": skipped})
                continue
            results.append(trial(kind, name, folder, rng, references, run_time, disk))
    finally:
        if "full-disk" in {k for k, _ in plan} and not skipped:
            subprocess.run(["umount", str(disk)], capture_output=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="archlint-fix-stress-"))
    started = time.perf_counter()
    warm = root / "warm.py"
    warm.write_text(TEMPLATES["train"])
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        archlint_main([str(warm), "--fix", "--no-cache", "-q", "-j", "1"])  # imports what every run needs
    warm.unlink()
    references = {}
    for name, text in TEMPLATES.items():
        references[name] = clean_fix(text, root)
        references[name + "+edit"] = clean_fix(text + EDIT, root)
        assert references[name] != text.encode(), f"{name}: nothing to fix"
    timing = time.perf_counter()
    for _ in range(3):
        (root / "timing.py").write_text(TEMPLATES["train"])
        wait(run_archlint(root / "timing.py"))
    run_time = (time.perf_counter() - timing) / 3
    rng = random.Random(args.seed)
    plan = [(KINDS[i % len(KINDS)], rng.choice(sorted(TEMPLATES))) for i in range(args.trials)]
    chunks = [(j, plan[j :: args.jobs], args.seed, references, run_time, str(root)) for j in range(args.jobs)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.jobs) as pool:
        results = [r for chunk in pool.map(worker, chunks) for r in chunk]
    elapsed = time.perf_counter() - started

    print(
        f"archlint --fix stress: {args.trials} trials, {args.jobs} jobs, seed {args.seed}, "
        f"one run ≈ {run_time:.2f} s, {elapsed:.0f} s in all"
    )
    print(
        f"{'kind':<11} {'trials':>6} {'damaged':>8} {'fixed':>6} {'untouched':>9} {'false claims':>12} "
        f"{'stray temps':>11}"
    )
    damaged = 0
    for kind in KINDS:
        rows = [r for r in results if r["kind"] == kind]
        ran = [r for r in rows if "skipped" not in r]
        if rows and not ran:
            print(f"{kind:<11} {len(rows):>6}  skipped: {rows[0]['skipped']}")
            continue
        bad = sum(r["damaged"] for r in ran)
        damaged += bad
        good = sum(r["fixed"] for r in ran)
        print(
            f"{kind:<11} {len(ran):>6} {bad:>8} {good:>6} {len(ran) - good - bad:>9} "
            f"{sum(r['false_claim'] for r in ran):>12} {sum(r['strays'] for r in ran):>11}"
        )
    total = sum(1 for r in results if "skipped" not in r)
    print(f"damaged files: {damaged} of {total} trials run (goal 0)")
    for r in results:
        if r.get("kept"):
            print(f"  kept for inspection: {r['kept']}")
    if not any(r.get("kept") for r in results):
        shutil.rmtree(root, ignore_errors=True)
    return 1 if damaged else 0


if __name__ == "__main__":
    sys.exit(main())
