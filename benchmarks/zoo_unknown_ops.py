"""Ops without a cost formula over the model zoo: every torchvision builder, a sample of timm
models and a few Hugging Face language models (built from configs). Goal: zero unknown ops.

    python benchmarks/zoo_unknown_ops.py [--timm 300] [--only torchvision|timm|hf] [--out rows.jsonl]
                                         [--models timm/a,hf/b]

Nothing downloads (weights=None, pretrained=False, HF from config objects). Models are built on
the meta device where the constructor allows it (capture needs shapes only); detection and optical
flow models, which fx cannot trace, are recorded by dispatch on real weights at a small size.
The timm sample is every k-th name of `timm.list_models()` (sorted), so it spans every family and
is the same on every run. Each model gets --limit seconds; a model that fails or runs out of time
is reported as such (not counted as zero unknown ops). One JSON row per model goes to --out as it
finishes; the summary at the end prints the unknown-op count per op name.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
import warnings
from collections import Counter

import torch

from archlint.config import Settings
from archlint.model.analyze import analyze_model


class OutOfTime(BaseException):
    """Not an Exception: capture's fallbacks catch those, and must not take a timeout for a failure."""


def _alarm(signum, frame):
    raise OutOfTime()


def _settings(strategy=None) -> Settings:
    s = Settings()
    s.strategy = strategy
    return s


def _meta(build):
    try:
        with torch.device("meta"):
            return build().eval()
    except Exception:  # a constructor that needs real data (regnet's widths): build it for real
        return build().eval()


def torchvision_cases():
    import torchvision
    from torchvision.models import get_model, list_models

    def case(name, module, inputs, strategy=None, real=False, **kwargs):
        def build():
            return get_model(name, weights=None, **kwargs)

        return f"torchvision/{name}", (lambda: build().eval()) if real else (lambda: _meta(build)), inputs, strategy

    for name in list_models(module=torchvision.models):
        size = 299 if "inception" in name else 224 if ("vit" in name or "swin" in name or "maxvit" in name) else 64
        yield case(name, "cls", lambda s=size: (torch.randn(1, 3, s, s),))
    for name in list_models(module=torchvision.models.segmentation):
        yield case(name, "seg", lambda: (torch.randn(1, 3, 96, 96),), weights_backbone=None)
    video = {"mvit_v1_b": (1, 3, 16, 224, 224), "mvit_v2_s": (1, 3, 16, 224, 224), "s3d": (1, 3, 16, 224, 224)}
    for name in list_models(module=torchvision.models.video):
        shape = video.get(name, (1, 3, 4, 64, 64))
        dispatch = name in ("swin3d_s", "swin3d_b", "swin3d_t")
        yield case(name, "video", lambda s=shape: (torch.randn(*s),), "dispatch" if dispatch else None, real=dispatch)
    for name in list_models(module=torchvision.models.quantization):
        size = 299 if "inception" in name else 64
        yield case(name, "quant", lambda s=size: (torch.randn(1, 3, s, s),), quantize=False)
    for name in list_models(module=torchvision.models.detection):
        kwargs = {} if name.startswith("ssd") else {"min_size": 128, "max_size": 160}
        yield case(
            name, "det", lambda: ([torch.rand(3, 128, 160)],), "dispatch", real=True, weights_backbone=None, **kwargs
        )
    for name in list_models(module=torchvision.models.optical_flow):
        yield case(
            name, "flow", lambda: (torch.rand(1, 3, 128, 128), torch.rand(1, 3, 128, 128)), "dispatch", real=True
        )


def timm_names(count: int) -> list[str]:
    import timm

    names = sorted(timm.list_models())
    step = max(1, len(names) // count)
    return names[::step][:count]


def timm_cases(count: int, names: list[str] | None = None):
    import timm

    for name in names if names is not None else timm_names(count):

        def build(name=name):
            return timm.create_model(name, pretrained=False)

        def inputs(name=name):
            cfg = timm.get_pretrained_cfg(name)
            size = tuple(cfg.input_size) if cfg is not None else (3, 224, 224)
            return (torch.randn(1, *size),)

        yield f"timm/{name}", (lambda b=build: _meta(b)), inputs, None


HF = {  # small configs: two layers, narrow; the op mix is the full model's
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000)),
    "bert": (
        "BertConfig",
        "BertForMaskedLM",
        dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=1000),
    ),
    "llama": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            vocab_size=1000,
        ),
    ),
    "opt": (
        "OPTConfig",
        "OPTForCausalLM",
        dict(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            ffn_dim=128,
            vocab_size=1000,
            word_embed_proj_dim=64,
        ),
    ),
    "qwen2": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        dict(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            vocab_size=1000,
        ),
    ),
    "distilbert": (
        "DistilBertConfig",
        "DistilBertForMaskedLM",
        dict(n_layers=2, dim=64, n_heads=4, hidden_dim=128, vocab_size=1000),
    ),
}


def hf_cases():
    import transformers

    for name, (config_cls, model_cls, kwargs) in HF.items():

        def build(config_cls=config_cls, model_cls=model_cls, kwargs=kwargs):
            config = getattr(transformers, config_cls)(**kwargs)
            return getattr(transformers, model_cls)(config).eval()

        yield f"hf/{name}", build, (lambda: (torch.randint(0, 1000, (1, 32)),)), None


def run_case(name, build, inputs, strategy, limit: int) -> dict:
    row = {"model": name}
    start = time.perf_counter()
    signal.alarm(limit)
    try:
        model = build()
        _, result = analyze_model(model, inputs(), _settings(strategy))
        unknown = Counter(layer.op for layer in result.layers if not layer.known)
        row.update(strategy=result.strategy, ops=len(result.layers), unknown=dict(unknown))
    except OutOfTime:
        row["error"] = f"over {limit} s"
    except BaseException as exc:  # noqa: BLE001 - one bad model never ends the sweep; it is reported
        if isinstance(exc, KeyboardInterrupt):
            raise
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timm", type=int, default=300, help="timm models in the sample (default 300)")
    parser.add_argument("--only", choices=("torchvision", "timm", "hf"))
    parser.add_argument("--limit", type=int, default=120, help="seconds per model (default 120)")
    parser.add_argument("--out", help="write one JSON row per model here as it finishes")
    parser.add_argument("--models", help="comma-separated names to run only (e.g. timm/eva02_tiny_patch14_224)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    families = {"torchvision": torchvision_cases, "timm": lambda: timm_cases(args.timm), "hf": hf_cases}
    out = open(args.out, "a") if args.out else None
    total, failed, models_with_unknown, rows = Counter(), [], 0, 0
    for family, cases in families.items():
        if args.only and family != args.only:
            continue
        for name, build, inputs, strategy in cases():
            if args.models and name not in args.models.split(","):
                continue
            row = run_case(name, build, inputs, strategy, args.limit)
            rows += 1
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            if "error" in row:
                failed.append(row)
                print(f"{name}: FAILED {row['error']}", flush=True)
                continue
            total.update(row["unknown"])
            models_with_unknown += bool(row["unknown"])
            flag = f"  unknown: {row['unknown']}" if row["unknown"] else ""
            print(f"{name}: {row['ops']} ops, {row['strategy']}, {row['seconds']} s{flag}", flush=True)
    print(
        f"\n{rows} models, {len(failed)} failed, {models_with_unknown} with unknown ops; "
        f"unknown ops in all: {sum(total.values())}"
    )
    for op, count in total.most_common():
        print(f"  {op}: {count}")
    sys.exit(0)


if __name__ == "__main__":
    main()
