"""`--train` over the forward analysis's model zoo (issue 46): every model the forward sweeps
capture gets a training step, by the fallbacks said in its output.

    python benchmarks/zoo_train.py [--every 5] [--timm 15] [--only torchvision|timm|hf] [--out rows.jsonl]
                                   [--models torchvision/resnet18,hf/t5]
    python benchmarks/zoo_train.py --compare a.jsonl b.jsonl     # two runs: the same numbers?

The cases are the forward sweeps' own: benchmarks/zoo_unknown_ops.py's torchvision builders (every
--every-th, at their small inputs) and timm sample (--timm names spread over `timm.list_models()`),
and the Hugging Face configs of zoo_unknown_ops.py and tests/model/test_hf_zoo.py (MoE,
encoder-decoder, audio, vision-text), plus a diffusion U-Net with a timestep input
(tests/model/train/test_train_fallbacks.py's). Each runs in this process through
`archlint.analyze(model, ..., train=True)` as the API user would; a row is the model's JSON (its
numbers, notes and memory basis) or its error. Two runs with a different PYTHONHASHSEED must write
the same rows but for `seconds` (--compare says which differ).

Last full run (2026-11-29, 2 cores at load 18-30): 436 models (121 torchvision, 300 timm, 14 Hugging
Face configs, the U-Net), each a step (two past --limit while the machine was loaded took 15-19 s
run alone); 157 of them the same rows under PYTHONHASHSEED 1 and 2. At a
batch of 1, 20 refused the step in their own code (BatchNorm in train mode over one value per
channel), and Mask and Keypoint R-CNN asked for their targets' masks and keypoints: hence
train_inputs below.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import signal
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import archlint  # noqa: E402


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zoo = _load(ROOT / "benchmarks" / "zoo_unknown_ops.py", "zoo_unknown_ops_for_train")


def hf_zoo_cases():
    """tests/model/test_hf_zoo.py's configs, built on the meta device as that sweep builds them."""
    hf_zoo = _load(ROOT / "tests" / "model" / "test_hf_zoo.py", "hf_zoo_for_train")
    from archlint.model.loading.loaded import meta_build

    for name in hf_zoo.ZOO:

        def build(name=name):
            cls, config, inputs, _ = hf_zoo.ZOO[name]()
            model, _ = meta_build(cls, {"config": config})
            return model.eval(), inputs

        yield f"hf-zoo/{name}", build


def unet_cases():
    fallbacks = _load(ROOT / "tests" / "model" / "train" / "test_train_fallbacks.py", "train_fallbacks_for_zoo")

    def build():  # an object with real weights: a meta one has no weights for the forward's own fallback
        return fallbacks.TinyUNet(), (torch.randn(2, 3, 16, 16), torch.randint(0, 1000, (2,)))

    yield "diffusion/tiny_unet", build


def cases(every: int, timm_count: int, only: str | None = None):
    """(name, build, strategy): build() returns (model, inputs), inputs a tuple or a dict of keyword inputs."""

    def wrap(build, inputs):
        return lambda: (build(), inputs())

    if only in (None, "torchvision"):
        from torchvision.models import detection, list_models

        detectors = {f"torchvision/{n}" for n in list_models(module=detection)}
        for i, (name, build, inputs, strategy) in enumerate(zoo.torchvision_cases()):
            if i % every == 0:
                yield name, wrap(build, train_inputs(inputs, name in detectors)), strategy
    if only in (None, "timm") and timm_count:
        for name, build, inputs, strategy in zoo.timm_cases(timm_count):
            yield name, wrap(build, train_inputs(inputs, False)), strategy
    if only in (None, "hf"):
        for name, build, inputs, strategy in zoo.hf_cases():
            yield name, wrap(build, inputs), strategy
        for name, build in hf_zoo_cases():
            yield name, build, None
        for name, build in unet_cases():
            yield name, build, None


def train_inputs(inputs, detector: bool):
    """The forward sweep's inputs as a training step takes them: a batch of 2 where the sweep has 1
    (BatchNorm in train mode refuses one value per channel: segmentation's pooled ASPP branch, LeViT's
    and iFormer's BatchNorm1d heads, SSDlite's 1×1 extra layers), and a detector's targets (in train
    mode torchvision's detectors take them and return their losses): a box and its label, and the
    mask and keypoints Mask R-CNN and Keypoint R-CNN also train on (the others ignore them)."""

    def make():
        args = tuple(inputs())
        if detector:
            images = [image for image in args[0] for _ in range(2)]
            targets = [target(image.shape[-2:]) for image in images]
            return (images, targets)
        return tuple(torch.cat([a, a]) if isinstance(a, torch.Tensor) and a.shape[:1] == (1,) else a for a in args)

    return make


def target(size) -> dict:
    """One object in an image of `size` (height, width): its box, label, mask and 17 keypoints."""
    box = torch.tensor([[8.0, 12.0, 60.0, 90.0]])
    mask = torch.zeros(1, *size, dtype=torch.uint8)
    mask[:, 12:90, 8:60] = 1
    keypoints = torch.tensor([[[8.0 + 3 * k, 12.0 + 4 * k, 1.0] for k in range(17)]])
    return {"boxes": box, "labels": torch.tensor([1]), "masks": mask, "keypoints": keypoints}


def _inputs(inputs) -> tuple:
    if isinstance(inputs, dict):
        return (inputs,)
    return tuple(inputs)


def run_case(name: str, build, strategy, limit: int) -> dict:
    """One model's --train analysis: its JSON (less the run's seconds) or the error that stopped it."""
    row: dict = {"model": name}
    start = time.perf_counter()
    signal.alarm(limit)
    try:
        torch.manual_seed(0)  # the inputs (and a real build's weights) the same on every run
        model, inputs = build()
        analysis = archlint.analyze(model, *_inputs(inputs), train=True, strategy=strategy, name=name)
        doc = analysis.to_dict()
        if doc.get("errors"):
            row["error"] = " | ".join(doc["errors"])[:400]
        else:
            model_doc = doc["models"][0]
            memory = model_doc.get("memory") or {}
            row.update(
                train=model_doc["totals"]["train"],
                memory={k: memory.get(k) for k in ("peak_bytes", "basis", "adapted_ops", "phase") if k in memory},
                notes=[n for n in model_doc.get("notes", []) if "memory" in n or "real weights" in n],
                doc=model_doc,
            )
    except zoo.OutOfTime:
        row["error"] = f"over {limit} s"
    except BaseException as exc:  # noqa: BLE001 - one bad model never ends the sweep; it is reported
        if isinstance(exc, KeyboardInterrupt):
            raise
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def compare(a: Path, b: Path) -> int:
    """The models whose rows differ between two runs (all but `seconds`); 0 when none does."""

    def rows(path):
        return {
            r["model"]: {k: v for k, v in r.items() if k != "seconds"}
            for r in map(json.loads, path.read_text().splitlines())
        }

    first, second = rows(a), rows(b)
    differ = sorted(n for n in first.keys() & second.keys() if first[n] != second[n])
    for name in differ:
        keys = sorted(k for k in first[name].keys() | second[name].keys() if first[name].get(k) != second[name].get(k))
        print(f"{name}: differs in {keys}")
    print(f"{len(first.keys() & second.keys())} models in both, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=5, help="every k-th torchvision case (default 5; 1: all)")
    parser.add_argument("--timm", type=int, default=15, help="timm models in the sample (default 15)")
    parser.add_argument("--only", choices=("torchvision", "timm", "hf"))
    parser.add_argument("--limit", type=int, default=300, help="seconds per model (default 300)")
    parser.add_argument("--out", help="write one JSON row per model here as it finishes")
    parser.add_argument("--models", help="comma-separated names to run only")
    parser.add_argument("--compare", nargs=2, metavar="ROWS", help="compare two --out files and exit")
    args = parser.parse_args()
    if args.compare:
        return compare(Path(args.compare[0]), Path(args.compare[1]))
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, zoo._alarm)
    wanted = set(args.models.split(",")) if args.models else None
    out = open(args.out, "a") if args.out else None  # noqa: SIM115 - a benchmark's log, not archlint's output
    failed, total = [], 0
    for name, build, strategy in cases(args.every if not wanted else 1, args.timm, args.only):
        if wanted and name not in wanted:
            continue
        row = run_case(name, build, strategy, args.limit)
        total += 1
        if out:
            out.write(json.dumps(row, sort_keys=True) + "\n")
            out.flush()
        if "error" in row:
            failed.append(name)
            print(f"{name}: FAILED {row['error']}", flush=True)
            continue
        fallback = "; ".join(row["notes"]) or ""
        print(
            f"{name}: step {row['train']['step_flops']:.3e} FLOPs, peak {row['memory'].get('peak_bytes')} B, "
            f"{row['seconds']} s{'  [' + fallback[:160] + ']' if fallback else ''}",
            flush=True,
        )
    print(f"\n{total} models, {len(failed)} failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
