"""Regenerate the README's example outputs from archlint itself, so the numbers it shows are the
numbers archlint prints today (issue 39: resnet50 fp16 on rtx4090 read 65.3 ms in the README and
74.3 ms from archlint).

    PYTHONPATH=. python benchmarks/readme_examples.py            # rewrite every marked example
    PYTHONPATH=. python benchmarks/readme_examples.py NAME ...   # only these
    PYTHONPATH=. python benchmarks/readme_examples.py --check    # exit 1 when the README differs

An example is a region of README.md between `<!-- readme-example: NAME -->` and
`<!-- /readme-example -->`: the command block, then its output block, both written here from
EXAMPLES (the command as run, the output's lines as `keep` picks them from the full output). Only
static, deterministic outputs are examples (counts, device-spec estimates, the --train memory
model): measured timings (--latency, --what-if, `archlint loader`) differ per run and machine and
stay hand-written, with their conditions said beside them. tests/integration/test_readme_examples.py
checks the cheap ones on every run of the suite and the rest under `-m slow`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# `model.py:resnet50` in the README's commands: torchvision's resnet50, never downloaded
MODEL_PY = (
    "from torchvision.models import resnet50 as _resnet50\n\n\ndef resnet50():\n    return _resnet50(weights=None)\n"
)
START = re.compile(r"<!-- readme-example: (?P<name>[\w-]+) -->\n")
END = "<!-- /readme-example -->"


@dataclass
class Example:
    """A README command and the lines of its output the README shows."""

    args: list[str]
    keep: Callable[[list[str]], list[str]]
    cheap: bool = True  # checked on every test run (else under -m slow)


def _starting(*prefixes: str, rows: tuple[str, ...] = ()) -> Callable[[list[str]], list[str]]:
    """The lines that start with one of the prefixes, and the table rows of the named layers."""

    def keep(lines: list[str]) -> list[str]:
        return [
            line for line in lines if line.startswith(prefixes) or any(line.startswith(f"│ {row} ") for row in rows)
        ]

    return keep


def _span(first: str, last: str) -> Callable[[list[str]], list[str]]:
    """From the first line starting with `first` through the next starting with `last`."""

    def keep(lines: list[str]) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(first))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith(last))
        return lines[start : end + 1]

    return keep


def _fit(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("  memory over the step:") or " AL610 " in line]


EXAMPLES: dict[str, Example] = {
    "train-a100": Example(
        [
            "model.py:resnet50",
            "--input-shape",
            "32,3,224,224",
            "--train",
            "--optimizer",
            "adamw",
            "--device-spec",
            "a100-sxm",
        ],
        _span("  training step:", "  ESTIMATED MFU"),
    ),
    "fit-l4": Example(
        [
            "model.py:resnet50",
            "--input-shape",
            "512,3,224,224",
            "--train",
            "--optimizer",
            "adamw",
            "--device-spec",
            "l4",
        ],
        _fit,
        cheap=False,
    ),
    "estimate-rtx4090": Example(
        ["model.py:resnet50", "--input-shape", "256,3,224,224", "--dtype", "float16", "--device-spec", "rtx4090"],
        _starting("  ESTIMATED on", "    assumes: time by bound", "slowest ", rows=("layer2.0.downsample.0",)),
    ),
}


def output(example: Example) -> list[str]:
    """The example's full text output, run as the README's reader runs it (in a folder holding
    model.py, the terminal 160 columns wide as archlint makes it when not a terminal)."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "model.py").write_text(MODEL_PY, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            [sys.executable, "-m", "archlint", *example.args, "--exit-zero", "-q"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    if done.returncode != 0:
        raise RuntimeError(f"archlint {' '.join(example.args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return [line.rstrip() for line in done.stdout.splitlines()]


def region(name: str, example: Example) -> str:
    """The README text between the markers: the command, then the lines of its output."""
    lines = example.keep(output(example))
    if not lines:
        raise RuntimeError(f"{name}: the output has none of the lines the README shows; update EXAMPLES[{name!r}].keep")
    return "```bash\narchlint " + " ".join(example.args) + "\n```\n```\n" + "\n".join(lines) + "\n```\n"


def regions(text: str) -> dict[str, tuple[int, int]]:
    """Each marked example's (start, end) offsets of its content in the README text."""
    found = {}
    for match in START.finditer(text):
        end = text.find(END, match.end())
        if end < 0:
            raise RuntimeError(f"README.md: example {match['name']!r} has no closing {END}")
        found[match["name"]] = (match.end(), end)
    return found


def main(argv: list[str]) -> int:
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("--")] or list(EXAMPLES)
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        print(f"unknown example {unknown[0]!r}; the examples: {', '.join(EXAMPLES)}", file=sys.stderr)
        return 2
    text = README.read_text(encoding="utf-8")
    marked = regions(text)
    missing = [n for n in names if n not in marked]
    if missing:
        print(f"README.md has no region for {missing[0]!r} (<!-- readme-example: {missing[0]} -->)", file=sys.stderr)
        return 2
    stale = []
    for name in sorted(names, key=lambda n: -marked[n][0]):  # from the end: earlier offsets stay valid
        start, end = marked[name]
        fresh = region(name, EXAMPLES[name])
        if text[start:end] != fresh:
            stale.append(name)
            text = text[:start] + fresh + text[end:]
    if check:
        print(f"stale: {', '.join(stale)}" if stale else "README examples match archlint's output")
        return 1 if stale else 0
    if stale:
        README.write_text(text, encoding="utf-8")
    print(f"rewrote: {', '.join(stale)}" if stale else "README examples already match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
