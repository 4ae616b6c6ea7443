"""Does `archlint --what-if` report the speed-up that the same transformation, written by hand in a
plain timing script, gives? And what does --what-if cost next to --latency? One run, CPU.

For each model: one `archlint MODEL --latency` process and one `archlint MODEL --what-if` process
(wall times; the roofline peaks are calibrated once before the first), then a plain in-process
script that applies each transformation archlint found applicable by hand (torch's own calls:
torch.fx.experimental.optimization.fuse, .to(memory_format=...), quantize_dynamic, autocast,
inference_mode, torch.compile) and times it against the untouched model, passes interleaved, the
median of the per-pass ratios after warm-up. Printed per transformation:
  archlint's speed-up [IQR] · the hand-written one [IQR] · ratio archlint / hand · verdict:
  "agree" when within ±15%, or when both IQRs hold 1.0× (both within noise of no change).
Then per model: the --what-if wall time minus compile time over the --latency wall time
(target < 3×), and the what-ifs' duration archlint estimated before starting them (said on stderr,
repeated in a note) against the time they took (goal, issue 45: within 2× of it).

    python benchmarks/what_if.py [--models resnet50,mobilenet_v3_large,efficientnet_b0,vit_b_16,lstm_lm]
        [--warmup 4] [--repeat 12] [--skip compile] [--threads N] [--json out.json]

Models are torchvision's with weights=None, and a small LSTM language model defined here. CPU
timings depend on what else the machine runs: the load average is printed with each model.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch import nn

from archlint.model.speedups.run import SLACK_S

MODELS = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_b_16", "lstm_lm")
TARGETS = """
import torch
from torch import nn
from torchvision.models import efficientnet_b0, mobilenet_v3_large, resnet50, vit_b_16  # weights=None


class lstm_lm(nn.Module):
    '''A small LSTM language model: 8k vocabulary, 2 x 512 LSTM, batch 2 x 32 tokens.'''

    def __init__(self, vocab=8000, dim=256, hidden=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    @staticmethod
    def example_inputs():
        return (torch.randint(0, 8000, (2, 32), generator=torch.Generator().manual_seed(0)),)

    def forward(self, tokens):
        return self.out(self.lstm(self.embed(tokens))[0])
"""


def archlint(file: Path, name: str, flags: list[str], out: Path) -> float:
    shape = [] if name == "lstm_lm" else ["--input-shape", "1,3,224,224"]
    cmd = [
        sys.executable,
        "-m",
        "archlint",
        f"{file}:{name}",
        *shape,
        *flags,
        "--output-format",
        "json",
        "-o",
        str(out),
        "--exit-zero",
        "--select",
        "AL205",
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"archlint failed on {name}: {done.stderr.strip()[-400:]}")
    return time.perf_counter() - start


# ---- the same transformations, by hand ---------------------------------------------------------


def by_hand(model: nn.Module, inputs: tuple, chain: list[str]):
    """(model, inputs, a context factory) with `chain` applied the plain way."""
    from contextlib import ExitStack

    model = copy.deepcopy(model).eval()
    autocast, grad = None, torch.no_grad
    for name in chain:
        if name == "fold-bn":
            from torch.fx.experimental.optimization import fuse

            model = fuse(model)  # Conv+BN only (torch's own); archlint also folds Linear+BN
        elif name == "channels-last":
            model = model.to(memory_format=torch.channels_last)
            inputs = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in inputs)
        elif name == "int8-dynamic":
            with warnings.catch_warnings():  # torch.ao's deprecation notices
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype=torch.qint8)
        elif name == "bf16":
            autocast = torch.bfloat16
        elif name == "inference-mode":
            grad = torch.inference_mode
        elif name == "compile":
            torch._dynamo.reset()
            model = torch.compile(model)
        else:  # sdpa: rewriting a model's attention by hand is per model; not compared here
            raise LookupError(f"no hand-written version of {name}")

    def call():
        with ExitStack() as stack:
            stack.enter_context(grad())
            if autocast is not None:
                stack.enter_context(torch.autocast("cpu", dtype=autocast))
            return model(*inputs)

    return call


def plain_speedup(model, inputs, chain, warmup: int, repeat: int) -> tuple[float, list[float]]:
    base = by_hand(model, inputs, [])
    fast = by_hand(model, inputs, chain)
    for _ in range(warmup):
        base(), fast()
    ratios = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        base()
        t1 = time.perf_counter_ns()
        fast()
        t2 = time.perf_counter_ns()
        ratios.append((t1 - t0) / (t2 - t1))
    q1, q2, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return q2, [q1, q3]


def build(name: str, module) -> tuple[nn.Module, tuple]:
    model = getattr(module, name)(weights=None) if name != "lstm_lm" else module.lstm_lm()
    if name == "lstm_lm":
        return model.eval(), module.lstm_lm.example_inputs()
    inputs = (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)
    return model.eval(), inputs


def seconds_of(text: str) -> float:
    """archlint.units.duration's words back to seconds: "40 s", "5 min 42 s"."""
    m = re.fullmatch(r"(?:(\d+) min )?(\d+) s", text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return 60 * int(m.group(1) or 0) + int(m.group(2))


def expected_and_took(notes: list[str]) -> tuple[float, float] | None:
    """(estimated, taken) seconds of the what-ifs, from archlint's note "what-ifs: took T against E
    estimated (...)" (the estimate was said on stderr before they started)."""
    for note in notes:
        m = re.match(r"what-ifs: took (.+?) against (.+?) estimated", note)
        if m:
            return seconds_of(m.group(2)), seconds_of(m.group(1))
    return None


def verdict(a: float, a_iqr, h: float, h_iqr) -> str:
    if abs(a / h - 1) <= 0.15:
        return "agree"
    if a_iqr[0] <= 1.0 <= a_iqr[1] and h_iqr[0] <= 1.0 <= h_iqr[1]:
        return "agree (both within noise of 1.0×)"
    return "DIFFER"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--repeat", type=int, default=12)
    p.add_argument("--skip", default="", help="transformations to leave out, e.g. compile")
    p.add_argument("--threads", type=int, help="torch threads, here and in the archlint processes (default: torch's)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.threads:  # on a shared machine one thread per process stalls far less than several spinning ones
        torch.set_num_threads(a.threads)
        os.environ["OMP_NUM_THREADS"] = str(a.threads)
    skip = {s for s in a.skip.split(",") if s}
    from archlint.whatif_names import NAMES

    names = ",".join(n for n in NAMES if n not in skip)
    tmp = Path(tempfile.mkdtemp())
    file = tmp / "wi_models.py"
    file.write_text(TARGETS)
    sys.path.insert(0, str(tmp))
    import wi_models

    subprocess.run([sys.executable, "-m", "archlint", "calibrate"], capture_output=True)
    timing = ["--warmup", str(a.warmup), "--repeat", str(a.repeat)]
    rows, summary, estimates = [], [], []
    for name in a.models.split(","):
        load = os.getloadavg()[0]
        t_lat = archlint(file, name, ["--latency", *timing], tmp / "lat.json")
        t_wi = archlint(file, name, [f"--what-if={names}", *timing], tmp / "wi.json")
        result = json.loads((tmp / "wi.json").read_text())["models"][0]
        compile_s = sum(w.get("compile_s") or 0 for w in result["what_if"])
        ratio = (t_wi - compile_s) / t_lat
        summary.append((name, load, t_lat, t_wi, compile_s, ratio))
        print(
            f"\n{name} (load average {load:.1f} on {os.cpu_count()} cores): --latency {t_lat:.1f} s, --what-if "
            f"{t_wi:.1f} s ({compile_s:.1f} s compiling) → {ratio:.2f}× without compile (target < 3×)",
            flush=True,
        )
        said = expected_and_took(result["notes"])
        if said is None:
            print("  the what-ifs' duration note is missing: expected vs actual not known", flush=True)
        else:
            expected, took = said
            estimates.append((name, expected, took))
            within = took <= 2 * expected or took <= expected + SLACK_S
            print(
                f"  what-ifs: expected {expected:.0f} s (said before they started), took {took:.0f} s → "
                f"{took / max(expected, 1):.2f}× the estimate (goal ≤ 2×, or {SLACK_S:g} s more): "
                f"{'within' if within else 'NOT within'}",
                flush=True,
            )
        model, inputs = build(name, wi_models)
        for w in result["what_if"]:
            if not w["applicable"] or w["speedup"] is None:
                print(f"  {w['name']:<42} not applicable: {w['reason'][:90]}", flush=True)
                rows.append({"model": name, "name": w["name"], "applicable": False, "reason": w["reason"]})
                continue
            chain = w["name"].removeprefix("combined: ").split(" + ")
            try:
                h, h_iqr = plain_speedup(model, inputs, chain, a.warmup, a.repeat)
            except LookupError as why:
                print(f"  {w['name']:<42} archlint {w['speedup']:.2f}×, {why}", flush=True)
                continue
            v = verdict(w["speedup"], w["spread"], h, h_iqr)
            print(
                f"  {w['name']:<42} archlint {w['speedup']:.2f}× [{w['spread'][0]:.2f}–{w['spread'][1]:.2f}]  "
                f"by hand {h:.2f}× [{h_iqr[0]:.2f}–{h_iqr[1]:.2f}]  ratio {w['speedup'] / h:.2f}  {v}  "
                f"(rel diff {w['max_rel_diff']:.1e})",
                flush=True,
            )
            rows.append(
                {
                    "model": name,
                    "name": w["name"],
                    "archlint": w["speedup"],
                    "archlint_iqr": w["spread"],
                    "hand": h,
                    "hand_iqr": h_iqr,
                    "verdict": v,
                    "max_rel_diff": w["max_rel_diff"],
                    "compile_s": w["compile_s"],
                }
            )
            if a.json:
                a.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    compared = [r for r in rows if "verdict" in r]
    agree = sum(r["verdict"] != "DIFFER" for r in compared)
    print(
        f"\n{agree} of {len(compared)} measured what-ifs agree with the hand-written script "
        f"(±15%, or both within noise of 1.0×)"
    )
    print(
        "analysis time, --what-if (compile excluded) / --latency: "
        + ", ".join(f"{n} {r:.2f}×" for n, _, _, _, _, r in summary)
    )
    print(
        "what-ifs, taken / expected: "
        + ", ".join(f"{n} {t:.0f} s / {e:.0f} s = {t / max(e, 1):.2f}×" for n, e, t in estimates)
    )
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "summary": summary, "estimates": estimates}, indent=1))


if __name__ == "__main__":
    main()
