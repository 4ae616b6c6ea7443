"""Snapshot archlint's JSON output, to show a refactoring left behaviour unchanged (issue 27).

    PYTHONPATH=. python benchmarks/output_snapshot.py write DIR [NAME,...]   # every target (or these), JSON each
    python benchmarks/output_snapshot.py compare BEFORE AFTER        # byte-compare two snapshots

Targets, each run through the installed `archlint` command exactly as a user runs it:
- every torchvision classification model, plus detection, segmentation and video samples;
- a fixed timm sample (every 40th name of `timm.list_models()`, plus a few popular ones);
- two Hugging Face models built from config objects;
- three models with `--device-spec` (estimates), one with `--tree`;
- `--train` on CNNs, a ViT, timm, GPT-2 and BERT: every optimizer and implementation, a GPU spec, a budget;
- the code evaluation projects (`benchmarks/eval_data/training_projects/*`), each linted from its own folder so
  paths in the output do not depend on where the folder lives, and with `--show-info`;
- the bundled examples (model, data pipeline, notebook) and the GPU traces in ../shared/traces.

Timings are not compared: no target runs `--latency`, and any key named in VOLATILE is dropped
before writing. Everything else must be byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the projects' folder; benchmarks/code_eval in a checkout from before issue 27 moved it (a "before" run)
EVAL_DATA = next(
    (
        p
        for p in (ROOT / "benchmarks" / "eval_data" / "training_projects", ROOT / "benchmarks" / "code_eval")
        if p.is_dir()
    ),
    ROOT / "benchmarks" / "eval_data" / "training_projects",
)
TRACES = next(
    (p / "shared" / "traces" for p in ROOT.parents if (p / "shared" / "traces").is_dir()),
    ROOT.parent / "shared" / "traces",
)  # the workplace's real GPU traces, beside the checkout
VOLATILE = {"timing", "elapsed_s", "wall_s"}

ZOO = """
import timm, torchvision
from torchvision import models as tv
from transformers import GPT2Config, GPT2LMHeadModel, BertConfig, BertModel

def tv_model(name):
    try:
        return tv.get_model(name, weights=None, weights_backbone=None)  # detection, segmentation: no download
    except TypeError:
        return tv.get_model(name, weights=None)

def timm_model(name):
    return timm.create_model(name, pretrained=False)

def gpt2():
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4)).eval()

def bert():
    return BertModel(BertConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=256)).eval()
"""


def _factories(names: list[str], kind: str) -> str:
    return "".join(
        f"\ndef {kind}__{n.replace('.', '_').replace('-', '_')}():\n    return {kind}_model({n!r})\n" for n in names
    )


def _targets() -> list[tuple[str, list[str]]]:
    import timm
    from torchvision import models as tv

    classify = sorted(tv.list_models(module=tv))
    others = [
        "fasterrcnn_mobilenet_v3_large_fpn",
        "fcn_resnet50",
        "deeplabv3_mobilenet_v3_large",
        "r3d_18",
        "raft_small",
    ]
    names = timm.list_models()
    sample = sorted(
        set(names[::40]) | {"resnet50d", "efficientnet_b0", "convnext_atto", "deit_tiny_patch16_224", "levit_128"}
    )
    zoo = Path(tempfile.gettempdir()) / "archlint-snapshot" / "zoo.py"  # fixed: targets appear in the JSON
    zoo.parent.mkdir(exist_ok=True)
    zoo.write_text(ZOO + _factories(classify + others, "tv") + _factories(sample, "timm"), encoding="utf-8")
    runs: list[tuple[str, list[str]]] = []
    square = [n for n in classify if n != "inception_v3"]
    for i in range(0, len(square), 8):  # eight models a process: one startup, each model's result in the same JSON
        chunk = square[i : i + 8]
        runs.append(
            (f"tv-{chunk[0]}-to-{chunk[-1]}", [f"{zoo}:tv__{n}" for n in chunk] + ["--input-shape", "1,3,224,224"])
        )
    runs.append(("tv-inception_v3", [f"{zoo}:tv__inception_v3", "--input-shape", "1,3,299,299"]))
    shapes = {"r3d_18": "1,3,8,112,112", "raft_small": None}
    for n in others:
        if n == "raft_small":
            runs.append(
                (f"tv-{n}", [f"{zoo}:tv__{n}", "--input", "image1=1,3,128,128", "--input", "image2=1,3,128,128"])
            )
        else:
            runs.append((f"tv-{n}", [f"{zoo}:tv__{n}", "--input-shape", shapes.get(n, "1,3,224,224")]))
    by_size: dict[tuple, list[str]] = {}
    for n in sample:  # each at its own default input size, batch 1; one process a size (up to 6 models)
        cfg = timm.get_pretrained_cfg(n)
        by_size.setdefault(tuple(cfg.input_size) if cfg is not None else (3, 224, 224), []).append(n)
    for size, names_at in sorted(by_size.items()):
        for i in range(0, len(names_at), 6):
            chunk = names_at[i : i + 6]
            runs.append(
                (
                    f"timm-{chunk[0]}-to-{chunk[-1]}",
                    [f"{zoo}:timm__{n.replace('.', '_').replace('-', '_')}" for n in chunk]
                    + ["--input-shape", ",".join(map(str, (1, *size)))],
                )
            )
    tokens = ["--input", "input_ids=1,32:int64"]
    runs += [("hf-gpt2", [f"{zoo}:gpt2", *tokens]), ("hf-bert", [f"{zoo}:bert", *tokens])]
    for spec in ("a100-sxm", "rtx4090", "t4"):
        runs.append(
            (f"estimate-{spec}", [f"{zoo}:tv__resnet50", "--input-shape", "8,3,224,224", "--device-spec", spec])
        )
    runs += _train_targets(zoo, tokens)
    runs.append(("tree-mobilenet_v2", [f"{zoo}:tv__mobilenet_v2", "--tree", "--input-shape", "1,3,224,224"]))
    # relative to the checkout (the runs start there): the JSON does not depend on where it lives
    runs.append(("example-TinyNet", ["examples/nets.py:TinyNet", "--input-shape", "1,3,56,56"]))
    runs.append(("example-lint", ["examples", "--show-info", "--no-cache"]))
    for trace in sorted(TRACES.glob("*.json*")):
        runs.append((f"trace-{trace.name.split('.')[0]}", ["trace", str(trace)]))
    return runs


def _train_targets(zoo: Path, tokens: list[str]) -> list[tuple[str, list[str]]]:
    """`--train` runs: the memory model's per-op timeline is in the JSON, so a speed-up of the meta
    step that moved one event shows here. Every optimizer and implementation, a GPU spec (its
    allocator replay and the search for the largest batch), a budget, a model's own loss."""
    image = ["--input-shape", "2,3,224,224"]  # batch 2: BatchNorm cannot train on one value a channel
    cnns = [f"{zoo}:tv__{n}" for n in ("resnet18", "mobilenet_v3_large", "efficientnet_b0", "densenet121")]
    runs = [("train-tv-adam", [*cnns, *image, "--train"])]
    for optimizer in ("sgd", "sgd-momentum", "adamw", "adamw-foreach", "adam-fused", "sgd-momentum-foreach"):
        runs.append((f"train-{optimizer}", [*cnns[:2], *image, "--train", "--optimizer", optimizer]))
    runs.append(("train-vit", [f"{zoo}:tv__vit_b_16", *image, "--train", "--optimizer", "adamw"]))
    runs.append(("train-h100", [f"{zoo}:tv__resnet50", *image, "--train", "--device-spec", "h100-sxm"]))
    runs.append(("train-budget", [cnns[1], *image, "--train", "--memory-budget", "1GB"]))
    timm_names = ("convnext_atto", "deit_tiny_patch16_224", "levit_128", "efficientnet_b0")
    runs.append(("train-timm", [*(f"{zoo}:timm__{n}" for n in timm_names), *image, "--train"]))
    runs.append(("train-hf-gpt2", [f"{zoo}:gpt2", *tokens, "--train", "--optimizer", "adamw"]))
    runs.append(("train-hf-gpt2-labels", [f"{zoo}:gpt2", *tokens, "--input", "labels=1,32:int64", "--train"]))
    runs.append(("train-hf-bert-h100", [f"{zoo}:bert", *tokens, "--train", "--device-spec", "h100-sxm"]))
    runs.append(("train-example-TinyNet", ["examples/nets.py:TinyNet", "--input-shape", "2,3,56,56", "--train"]))
    return runs


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _run(args: list[str], out: Path, cwd: Path | None = None) -> None:
    raw = out.with_suffix(".raw")
    quiet = [] if args[0] == "trace" else ["-q"]  # archlint trace shows no progress anyway
    proc = subprocess.run(
        ["archlint", *args, "--output-format", "json", "-o", str(raw), *quiet, "--exit-zero"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    if not raw.exists():
        out.write_text(f"no output (exit {proc.returncode}):\n{proc.stderr}", encoding="utf-8")
        return
    data = _strip(json.loads(raw.read_text(encoding="utf-8")))
    data.pop("version", None)
    out.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False), encoding="utf-8")
    raw.unlink()


def write(folder: Path, only: set[str] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    runs = [(name, args) for name, args in _targets() if not only or name in only]
    for name, args in runs:
        _run(args, folder / f"{name}.json", cwd=ROOT)
        print(name, flush=True)
    for project in sorted(p for p in EVAL_DATA.iterdir() if p.is_dir() and (not only or f"lint-{p.name}" in only)):
        _run([".", "--show-info", "--no-cache"], folder / f"lint-{project.name}.json", cwd=project)
        print(project.name, flush=True)


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    differ = [
        n
        for n in names
        if not (before / n).exists()
        or not (after / n).exists()
        or (before / n).read_bytes() != (after / n).read_bytes()
    ]
    failed = [
        n for n in names if (after / n).exists() and (after / n).read_text(encoding="utf-8").startswith("no output")
    ]
    print(
        f"{len(names)} outputs compared: {len(names) - len(differ)} byte-identical, {len(differ)} differ; "
        f"{len(failed)} runs produced no JSON"
    )
    for n in differ:
        print("  differs:", n)
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "write":  # optional third: only these names, comma-separated
        write(Path(sys.argv[2]), set(sys.argv[3].split(",")) if len(sys.argv) == 4 else None)
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
