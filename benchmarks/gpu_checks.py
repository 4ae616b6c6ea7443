"""Every check that needs a CUDA GPU, in one prepared run for a lent GPU (issues 28 and 30).

Three steps, two of them on this machine:

  plan    (CPU) choose the models and compute what the GPU run must confirm: the latency sample
          (timm models of the RTX 4090 table outside the 200 rows the published evaluation
          samples, so none of them tuned anything), and archlint's `max_batch` under a budget
  run     (GPU) measure, each section within its share of one wall-clock budget, writing
          results after every section (a run cut short still returns what it measured)
  report  (CPU) set archlint's numbers beside the measured ones and print the tables

Sections of `run`, in the order they run (most wanted first):
  env         the GPU, torch, CUDA, and the CUDA context's memory (what no torch counter sees)
  peaks       archlint calibrate's peaks (matmul, copy) in float32, float16 and bfloat16
  latency     timm's inference benchmark (AMP float16, NCHW, eager, batch 256) on the sample:
              written as a table in the published tables' columns, `--published` reads it
  memory      a real training step per model and optimizer: torch.cuda.max_memory_allocated
              of the steady step (after a warm step made the optimizer state), and reserved;
              each model as in a fresh process (cached blocks and cuBLAS workspaces freed first)
  max_batch   archlint's max_batch under a budget, tried for real: the allocator limited to the
              budget less the measured context, two steps at max_batch and at max_batch + 1, then
              the real largest batch, bisected
  alloc_trace the caching allocator's own record of two steps of the models the replay missed
              most (every allocation, free and segment, and which op asked for which block);
              read against the memory model by benchmarks/gpu_alloc_trace.py
  workspace   what kernels allocate that the meta-device memory model cannot see: cuBLAS's
              workspace per thread (forward, autograd), cuDNN's per convolution and batch norm
  families    `archlint calibrate --families --device-spec h200` (archlint.model.estimating.families): one kernel per
              op family at model-like sizes, CUDA events; each family's share of the h200 spec's
              roofs, the eager per-op host cost, a GEMM/conv size curve, as device-spec TOML
  tests       the test suite's tests marked cuda
  step_time   forward / backward / optimizer.step timed per model, float32 and bf16 autocast
  cli         archlint itself on cuda: --latency, --train --latency, --trace, then `archlint trace`
  rule_prices AL611's and AL403's prices on the step against the step timed

Run: python benchmarks/gpu_checks.py plan --out .gpu/plan.json
     python benchmarks/gpu_checks.py run --plan .gpu/plan.json --out $OUT [--budget-s 420]
     python benchmarks/gpu_checks.py report --plan .gpu/plan.json --results DIR/gpu_checks.json
"""

from __future__ import annotations

import argparse
import csv
import gc
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TABLES = ROOT / "benchmarks" / "eval_data" / "published"
LATENCY_BATCH = 256
LATENCY_MODELS = 90
IMAGE = 224
DEV = os.environ.get("GPU_CHECKS_DEVICE", "cuda")  # another device only for a dry run of the script itself
TRAIN_BATCH = 32

# Models of the training-memory and step-time sections: name → (batch). `tv/`, `timm/`, `hf/`.
TRAIN_MODELS = [
    "tv/resnet18",
    "tv/resnet50",
    "tv/mobilenet_v2",
    "tv/mobilenet_v3_large",
    "tv/efficientnet_b0",
    "tv/densenet121",
    "tv/convnext_tiny",
    "tv/regnet_y_800mf",
    "tv/shufflenet_v2_x1_0",
    "tv/squeezenet1_0",
    "tv/vit_b_16",
    "tv/swin_t",
    "timm/resnet26d",
    "timm/efficientnet_b0",
    "timm/convnext_atto",
    "timm/vit_small_patch16_224",
    "timm/deit_tiny_patch16_224",
    "timm/ghostnet_100",
    "timm/regnetx_002",
    "hf/gpt2",
    "hf/bert",
    "hf/qwen3-32k",
]
OPTIMIZERS = ["sgd", "adam", "adamw"]
STEP_TIME_MODELS = [
    "tv/resnet50",
    "tv/vit_b_16",
    "tv/convnext_tiny",
    "tv/efficientnet_b0",
    "tv/mobilenet_v3_large",
    "tv/swin_t",
    "tv/densenet121",
    "timm/resnet26d",
    "hf/gpt2",
    "hf/bert",
]
# (model, optimizer, budget): archlint's max_batch under the budget, tried for real. GPT-2 with
# eager attention: with SDPA, transformers reads the mask's values (.item()), the meta device
# cannot answer, and the memory model runs real steps on this CPU instead (minutes at these sizes).
FIT_CASES = [
    ("tv/resnet50", "adamw", 8e9),
    ("tv/vit_b_16", "adamw", 8e9),
    ("hf/gpt2-eager", "adam", 6e9),
    ("tv/efficientnet_b0", "sgd", 4e9),
    ("tv/mobilenet_v3_large", "adamw", 3e9),
    ("timm/vit_small_patch16_224", "adamw", 4e9),
    ("hf/gpt2", "adamw", 8e9),
    ("tv/convnext_tiny", "sgd", 6e9),
    # held out: added after max_batch's margins were set from the cases above
    ("tv/swin_t", "adamw", 6e9),
    ("tv/densenet121", "sgd", 5e9),
    ("tv/resnet18", "adam", 3e9),
    ("timm/convnext_atto", "adamw", 2e9),
    ("timm/deit_tiny_patch16_224", "adamw", 2.5e9),
    ("tv/regnet_y_800mf", "sgd", 3e9),
    ("hf/bert", "adamw", 4e9),
    # issue 46: an LLM, whose output (the logits) the loop keeps through backward
    ("hf/qwen3-32k", "adamw", 20e9),
]


def train_batch(name: str) -> int:
    """The training sections' batch: images, or sequences for the language models (a quarter)."""
    return TRAIN_BATCH // 4 if name.startswith("hf/") else TRAIN_BATCH


# ---- models -------------------------------------------------------------------------------


def build(name: str, batch: int, device: str):
    """(model, args, kwargs) of a model name, its inputs at `batch` on `device`."""
    import torch

    kind, _, rest = name.partition("/")
    with torch.device(device):
        if kind == "tv":
            import torchvision.models as tvm

            kw = {"aux_logits": False, "init_weights": False} if rest == "googlenet" else {}
            return getattr(tvm, rest)(weights=None, **kw), (torch.randn(batch, 3, IMAGE, IMAGE),), {}
        if kind == "timm":
            import timm

            model = timm.create_model(rest, pretrained=False)
            size = model.pretrained_cfg.get("input_size", (3, IMAGE, IMAGE))
            return model, (torch.randn(batch, *size),), {}
        if kind == "hf":
            return _hf(rest, batch)
    raise SystemExit(f"unknown model {name}")


def _hf(name: str, batch: int):
    import torch

    if name.startswith("qwen3"):  # issue 46: a Qwen3-style LM whose logits (vocab 32000) dominate, 256 tokens
        from transformers import Qwen3Config, Qwen3ForCausalLM

        model = Qwen3ForCausalLM(
            Qwen3Config(
                vocab_size=32000,
                hidden_size=512,
                intermediate_size=1536,
                num_hidden_layers=4,
                num_attention_heads=8,
                num_key_value_heads=4,
                head_dim=64,
                max_position_embeddings=512,
                use_cache=False,
            )
        )
        ids = torch.randint(0, 32000, (batch, 256))
        return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if name.startswith("gpt2"):  # GPT-2 small, 6 layers, 512 tokens; gpt2-eager: without SDPA
        from transformers import GPT2Config, GPT2LMHeadModel

        attn = {"attn_implementation": "eager"} if name == "gpt2-eager" else {}
        model = GPT2LMHeadModel(GPT2Config(n_layer=6, n_positions=512, use_cache=False, **attn))
        seq = 512
    else:  # BERT base, 6 layers, 256 tokens
        from transformers import BertConfig, BertForSequenceClassification

        model = BertForSequenceClassification(BertConfig(num_hidden_layers=6))
        seq = 256
    ids = torch.randint(0, model.config.vocab_size, (batch, seq))
    return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


# ---- plan (CPU) ---------------------------------------------------------------------------


def latency_sample() -> list[dict]:
    """Timm models of the RTX 4090 table outside the published evaluation's 200 sampled rows,
    in sha256 order, fast enough to time (≥ 500 images/s published): the H200 table's rows."""
    import timm
    from published_accuracy import SAMPLE, read_table, sample

    table = TABLES / "timm-infer-amp-nchw-pt240-cu124-rtx4090.csv"
    rows = read_table(table)
    used = {(r["model"], r["img"]) for which in ("tune", "heldout") for r in sample(rows, which)}
    known = set(timm.list_models())
    fresh = sorted(
        (r for r in rows if (r["model"], r["img"]) not in used and r["model"] in known and r["published"] >= 500),
        key=lambda r: hashlib.sha256(f"{r['model']},{r['img']}".encode()).hexdigest(),
    )
    assert len(used) == 2 * SAMPLE
    return [{"model": r["model"], "img": r["img"], "batch": LATENCY_BATCH} for r in fresh[:LATENCY_MODELS]]


def plan(out: Path) -> None:
    import torch

    from archlint.devices import resolve
    from archlint.model.train.fit import fit_report

    spec = resolve("h200")
    fits = []
    for name, optimizer, budget in FIT_CASES:
        model, args, kwargs = build(name, train_batch(name), "cpu")
        t0 = time.perf_counter()
        report = fit_report(
            model.train(), args, kwargs, optimizer=optimizer, budget_bytes=int(budget), device_spec=spec
        )
        print(
            f"{name} {optimizer} budget {budget / 1e9:g} GB: max_batch {report['max_batch']} "
            f"range {report.get('max_batch_range')} "
            f"({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
        fits.append(
            {
                "model": name,
                "optimizer": optimizer,
                "budget_bytes": int(budget),
                "max_batch": report["max_batch"],
                "max_batch_range": report.get("max_batch_range"),
                "archlint": {k: v for k, v in report.items() if k != "timeline"},
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"latency": latency_sample(), "fits": fits, "torch": torch.__version__}, indent=1, default=str)
    )
    print(f"plan written to {out}")


# ---- run (GPU) ----------------------------------------------------------------------------


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def _events_ms(fn, warmup: int, repeat: int) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def _free() -> None:
    import torch

    _LOOP.clear()  # the last model's `out`
    gc.collect()
    torch.cuda.empty_cache()


def _as_a_fresh_process() -> bool:
    """Free what earlier runs left: cached blocks and cuBLAS's workspaces, which torch keeps per
    (thread, stream) for the process's life, so a model without a GEMM would otherwise carry the
    workspaces of the models before it (65 MiB on an H200). True when the workspaces were cleared."""
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        torch.cuda.synchronize()
        clear()
    _free()
    return clear is not None


def section_env(results: dict, budget: Budget, plan_data: dict) -> None:
    import torch

    torch.cuda.init()
    torch.zeros(1, device=DEV)
    props = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info()
    results["env"] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "total_bytes": total,
        # after CUDA is initialised and one tiny tensor allocated: the context and the driver's share
        "context_bytes": total - free - torch.cuda.memory_reserved(),
        "python": sys.version.split()[0],
    }
    try:
        import timm
        import torchvision
        import transformers

        results["env"].update(
            timm=timm.__version__, torchvision=torchvision.__version__, transformers=transformers.__version__
        )
    except ImportError as exc:
        results["env"]["import_error"] = str(exc)


def section_peaks(results: dict, budget: Budget, plan_data: dict) -> None:
    import torch

    from archlint.model.timing.roofline import measure_peaks

    results["peaks"] = {
        name: measure_peaks(torch.device(DEV), getattr(torch, name)) for name in ("float32", "float16", "bfloat16")
    }


def section_latency(results: dict, budget: Budget, plan_data: dict) -> None:
    """timm's benchmark.py inference: AMP float16 (torch.autocast), NCHW, eager, no_grad;
    samples/s = batch / mean step time."""
    import timm
    import torch

    rows = results.setdefault("latency", [])
    for row in plan_data["latency"][plan_data.get("latency_from", 0) :]:
        if budget.left() < 5:
            rows.append({**row, "skipped": "out of time"})
            continue
        try:
            with torch.device(DEV):
                model = timm.create_model(row["model"], pretrained=False).eval()
                x = torch.randn(row["batch"], 3, row["img"], row["img"])

            def run():
                with torch.no_grad(), torch.autocast(DEV, dtype=torch.float16):
                    model(x)

            first = _events_ms(run, 1, 1)[0]
            repeat = 3 if first > 300 else 10
            times = _events_ms(run, 2, repeat)
            mean = statistics.mean(times)
            rows.append(
                {
                    **row,
                    "step_ms": mean,
                    "median_ms": statistics.median(times),
                    "samples_per_s": row["batch"] / mean * 1e3,
                    "runs": repeat,
                }
            )
        except Exception as exc:  # one model's failure costs its row only; said in the row
            rows.append({**row, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        finally:
            model = x = None
            _free()
        print(
            f"  latency {row['model']}: {rows[-1].get('samples_per_s', rows[-1].get('error', rows[-1].get('skipped')))}",
            flush=True,
        )


# The loop's `out`: a step as users write it (out = model(x); loss = f(out); loss.backward(); opt.step())
# keeps its output through backward and the optimizer step, and the previous step's until the next
# forward returns, as archlint's memory model counts it (issue 46).
_LOOP: dict = {}


def _train_step(model, args, kwargs, opt):
    from archlint.model.train.memory import step_loss

    _LOOP["out"] = model(*args, **kwargs)
    loss = step_loss(_LOOP["out"])
    loss.backward()
    del loss
    opt.step()


def section_memory(results: dict, budget: Budget, plan_data: dict) -> None:
    import torch

    from archlint.model.train.memory import make_optimizer

    rows = results.setdefault("memory", [])
    for name in TRAIN_MODELS:
        for optimizer in OPTIMIZERS:
            if budget.left() < 4:
                rows.append({"model": name, "optimizer": optimizer, "skipped": "out of time"})
                continue
            row = {"model": name, "optimizer": optimizer, "cublas_workspaces_cleared": _as_a_fresh_process()}
            try:
                model, args, kwargs = build(name, train_batch(name), DEV)
                model.train()
                opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])
                torch.cuda.reset_peak_memory_stats()
                _train_step(model, args, kwargs, opt)  # warm: the optimizer state exists after it
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                # the first step's own peaks: does it (cuDNN's first choice of algorithms) set the
                # reserved peak the steady step then inherits?
                row["warm_max_allocated_bytes"] = torch.cuda.max_memory_allocated()
                row["warm_max_reserved_bytes"] = torch.cuda.max_memory_reserved()
                row["persistent_bytes"] = torch.cuda.memory_allocated()
                # what the warm step left reserved: max_memory_reserved below starts from it (is the
                # replay's shortfall the first step's segments, kept cached?)
                row["reserved_after_warm_bytes"] = torch.cuda.memory_reserved()
                torch.cuda.reset_peak_memory_stats()
                _train_step(model, args, kwargs, opt)
                torch.cuda.synchronize()
                row["max_allocated_bytes"] = torch.cuda.max_memory_allocated()
                row["max_reserved_bytes"] = torch.cuda.max_memory_reserved()
                row["batch"] = train_batch(name)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            finally:
                model = opt = args = kwargs = None
                _free()
            rows.append(row)
        print(f"  memory {name}: {[r.get('max_allocated_bytes', r.get('error')) for r in rows[-3:]]}", flush=True)


def max_batch_trials(case: dict) -> dict[int, str]:
    """The batches to try and what archlint claims of each: every batch up to the range's low end
    fits, none above its high end does; max_batch and max_batch + 1 are tried as well (no claim:
    they show where the real limit falls inside the range)."""
    trials: dict[int, str] = {}
    low, high = case.get("max_batch_range") or (None, None)
    if low:
        trials[low] = "fits"
    if high is not None:
        trials[high + 1] = "does not fit"
    for batch in (case["max_batch"], case["max_batch"] + 1):
        trials.setdefault(batch, "")
    return trials


def section_max_batch(results: dict, budget: Budget, plan_data: dict) -> None:
    """The allocator is limited to the budget less the context measured in `env`, so a batch
    that fits here fits a device of that much memory. Two passes: every case's claims
    (max_batch_range's ends) first, then max_batch and max_batch + 1 where time is left."""
    import torch

    total = results["env"]["total_bytes"]
    context = results["env"]["context_bytes"]
    rows = results.setdefault("max_batch", [])
    cases = []
    for case in plan_data["fits"]:
        if not case.get("max_batch"):
            rows.append({**_plain(case), "skipped": "archlint gave no max_batch"})
            continue
        rows.append({**_plain(case), "tried": {}})
        cases.append((case, rows[-1]["tried"], max_batch_trials(case)))
    for claims in (True, False):
        for case, tried, trials in cases:
            torch.cuda.set_per_process_memory_fraction((case["budget_bytes"] - context) / total)
            for batch, claim in trials.items():
                if bool(claim) == claims:
                    tried[str(batch)] = _try_batch(case, batch, claim, budget)
            torch.cuda.set_per_process_memory_fraction(1.0)
            print(f"  max_batch {case['model']}: {tried}", flush=True)
    # the real largest batch, bisected between the largest tried that fitted and the smallest that
    # did not: how many samples archlint's max_batch is off by
    for (case, tried, _), row in zip(cases, [r for r in rows if "tried" in r]):
        torch.cuda.set_per_process_memory_fraction((case["budget_bytes"] - context) / total)
        row["real_max_batch"] = _bisect(case, tried, budget)
        torch.cuda.set_per_process_memory_fraction(1.0)
        print(f"  max_batch {case['model']}: real {row['real_max_batch']} (archlint {case['max_batch']})", flush=True)


def _bisect(case: dict, tried: dict, budget: Budget) -> int | None:
    fit = [int(b) for b, t in tried.items() if t.get("fits") is True]
    oom = [int(b) for b, t in tried.items() if t.get("fits") is False]
    if not fit or not oom:
        return None
    lo, hi = max(fit), min(oom)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = tried[str(mid)] = _try_batch(case, mid, "", budget)
        if "fits" not in t:
            return None
        lo, hi = (mid, hi) if t["fits"] else (lo, mid)
    return lo if lo < hi else None


def _try_batch(case: dict, batch: int, claim: str, budget: Budget) -> dict:
    """Two training steps at `batch` under the allocator's limit: did they fit?"""
    import torch

    from archlint.model.train.memory import make_optimizer

    if budget.left() < 4:
        return {"claim": claim, "skipped": "out of time"}
    model = opt = args = kwargs = None
    _as_a_fresh_process()
    try:
        model, args, kwargs = build(case["model"], batch, DEV)
        model.train()
        opt = make_optimizer(case["optimizer"], [p for p in model.parameters() if p.requires_grad])
        torch.cuda.reset_peak_memory_stats()
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            _train_step(model, args, kwargs, opt)
        torch.cuda.synchronize()
        return {
            "claim": claim,
            "fits": True,
            "max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "max_reserved_bytes": torch.cuda.max_memory_reserved(),
        }
    except torch.OutOfMemoryError:
        return {"claim": claim, "fits": False, "max_reserved_bytes": torch.cuda.max_memory_reserved()}
    except Exception as exc:
        return {"claim": claim, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        model = opt = args = kwargs = None
        _free()


def _plain(case: dict) -> dict:
    return {k: case.get(k) for k in ("model", "optimizer", "budget_bytes", "max_batch", "max_batch_range")}


# Conv shapes of the memory section's models at its batch (32, 224²): (name, C_in, C_out, H=W, kernel,
# stride, groups, input needs a grad). Stems and patchifies take the image, which needs no grad.
WORKSPACE_CONVS = [
    ("stem 7x7/2 3-64 @224 (resnet)", 3, 64, 224, 7, 2, 1, False),
    ("stem 3x3/2 3-32 @224 (efficientnet, mobilenet)", 3, 32, 224, 3, 2, 1, False),
    ("patchify 4x4/4 3-40 @224 (convnext_atto)", 3, 40, 224, 4, 4, 1, False),
    ("patchify 16x16/16 3-768 @224 (vit_b_16)", 3, 768, 224, 16, 16, 1, False),
    ("3x3 64-64 @56 (resnet18)", 64, 64, 56, 3, 1, 1, True),
    ("3x3/2 128-128 @56 (resnet)", 128, 128, 56, 3, 2, 1, True),
    ("3x3 256-256 @14 (resnet)", 256, 256, 14, 3, 1, 1, True),
    ("3x3 512-512 @7 (resnet)", 512, 512, 7, 3, 1, 1, True),
    ("1x1 64-256 @56 (resnet50)", 64, 256, 56, 1, 1, 1, True),
    ("1x1 256-64 @56 (resnet50)", 256, 64, 56, 1, 1, 1, True),
    ("1x1/2 256-512 @56 (resnet50 downsample)", 256, 512, 56, 1, 2, 1, True),
    ("1x1 24-144 @56 (mobilenet_v2 expand)", 24, 144, 56, 1, 1, 1, True),
    ("depthwise 3x3 C144 @56 (mobilenet_v2)", 144, 144, 56, 3, 1, 144, True),
    ("depthwise 3x3/2 C96 @112 (mobilenet_v2)", 96, 96, 112, 3, 2, 96, True),
    ("depthwise 7x7 C96 @56 (convnext_tiny)", 96, 96, 56, 7, 1, 96, True),
    ("depthwise 7x7 C40 @56 (convnext_atto)", 40, 40, 56, 7, 1, 40, True),
    ("grouped 3x3 g3 C24 @56 (regnetx_002)", 24, 24, 56, 3, 1, 3, True),
    ("grouped 3x3 g4 C64 @56 (regnet_y_800mf)", 64, 64, 56, 3, 1, 4, True),
]


def _block_bytes(*tensors) -> int:
    """What the caching allocator counts for these tensors: each storage rounded up to 512 bytes."""
    return sum(-(-t.untyped_storage().nbytes() // 512) * 512 for t in tensors if t is not None)


def _peak_run(run):
    """`run()` from a synchronized start: (its result, the bytes allocated since and still held,
    the peak allocated beyond the start while it ran)."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = run()
    torch.cuda.synchronize()
    return result, torch.cuda.memory_allocated() - before, torch.cuda.max_memory_allocated() - before


# (model, optimizer) whose reserved memory the replay missed most (0.79-0.89 of max_memory_reserved),
# and the ViTs whose max_batch the replay under the budget puts 1-2 above the real one (peak_bytes
# 0.97-0.99 of max_memory_allocated there: which allocations does the meta step not see?)
TRACE_CASES = [
    ("tv/resnet18", "sgd"),
    ("timm/convnext_atto", "sgd"),
    ("timm/regnetx_002", "sgd"),
    ("tv/resnet50", "adamw"),
    ("tv/vit_b_16", "adamw"),
    ("timm/vit_small_patch16_224", "adamw"),
]
TRACE_ACTIONS = ("alloc", "free_completed", "segment_alloc", "segment_free")


def section_alloc_trace(results: dict, budget: Budget, plan_data: dict) -> None:
    """The caching allocator's own record of two training steps (torch.cuda.memory's history): each
    allocation, free and segment as [action, size, address], the allocation counter at each op's start
    and end (which op asked for which block), and where the second step began. What the replay of
    the memory model's storages (archlint.model.train.allocator) can be checked against, event by event."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from archlint.model.train.memory import make_optimizer

    def allocations() -> int:
        return torch.cuda.memory_stats().get("allocation.all.allocated", 0)

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            start = allocations()
            out = func(*args, **(kwargs or {}))
            self.ops.append([str(func.overloadpacket.__name__), start, allocations()])
            return out

    rows = results.setdefault("alloc_trace", [])
    for name, optimizer in TRACE_CASES:
        if budget.left() < 6:
            rows.append({"model": name, "optimizer": optimizer, "skipped": "out of time"})
            continue
        row = {"model": name, "optimizer": optimizer, "batch": train_batch(name)}
        model = opt = args = kwargs = None
        try:
            _as_a_fresh_process()
            model, args, kwargs = build(name, train_batch(name), DEV)
            model.train()
            opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])
            torch.cuda.synchronize()
            row["before_bytes"] = torch.cuda.memory_allocated()
            row["allocations_before"] = allocations()
            torch.cuda.memory._record_memory_history(max_entries=200000)
            steps = []
            for _ in range(2):
                with Ops() as mode:
                    opt.zero_grad(set_to_none=True)
                    _train_step(model, args, kwargs, opt)
                torch.cuda.synchronize()
                steps.append(
                    {
                        "ops": mode.ops,
                        "max_allocated_bytes": torch.cuda.max_memory_allocated(),
                        "max_reserved_bytes": torch.cuda.max_memory_reserved(),
                        "allocations_end": allocations(),
                    }
                )
            trace = torch.cuda.memory._snapshot()["device_traces"][0]
            torch.cuda.memory._record_memory_history(enabled=None)
            row["events"] = [[e["action"], e["size"], e["addr"]] for e in trace if e["action"] in TRACE_ACTIONS]
            row["steps"] = steps
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            model = opt = args = kwargs = None
            _free()
        rows.append(row)
        print(f"  alloc_trace {name}: {len(row.get('events', []))} events {row.get('error', '')}", flush=True)


def section_workspace(results: dict, budget: Budget, plan_data: dict) -> None:
    """What kernels allocate beyond their inputs, outputs and gradients (what the meta-device
    memory model cannot see). cuBLAS: torch keeps one workspace per (handle, stream), a handle per
    thread, so the forward thread and autograd's device thread each hold one once they ran a GEMM;
    each case runs on a fresh stream after the workspaces are cleared, and counts
    memory_allocated after less before less the tensors it made. cuDNN convolutions
    (cudnn.benchmark off, as the memory section runs): the transient workspace, as
    max_memory_allocated after reset_peak_memory_stats less what was allocated before and the
    outputs (forward) or gradients (backward)."""
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        results["workspace"] = {"skipped": "no CUDA device"}
        return
    torch.backends.cudnn.benchmark = False
    getters = {
        "cublas_workspace_size": "_cuda_getCublasWorkspaceSize",
        "cublaslt_workspace_size": "_cuda_getCublasLtWorkspaceSize",
    }
    out = results["workspace"] = {
        "config": {
            "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            "CUBLASLT_WORKSPACE_SIZE": os.environ.get("CUBLASLT_WORKSPACE_SIZE"),
            **{
                k: getattr(torch._C, fn)() if hasattr(torch._C, fn) else f"torch._C.{fn} missing"
                for k, fn in getters.items()
            },
            "capability": list(torch.cuda.get_device_capability()),
            "preferred_blas_library": str(torch.backends.cuda.preferred_blas_library()),
            "cudnn": torch.backends.cudnn.version(),
        }
    }
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    out["config"]["can_clear"] = clear is not None
    alloc = torch.cuda.memory_allocated

    def gemm(dtype, bias: bool) -> dict:
        """Forward y = x·Wᵀ (+ b) and its backward, each on a fresh stream, workspaces cleared first."""
        if clear:
            clear()
        torch.cuda.synchronize()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            x = torch.randn(512, 1024, device=DEV, dtype=dtype, requires_grad=True)
            w = torch.randn(1024, 1024, device=DEV, dtype=dtype, requires_grad=True)
            b = torch.randn(1024, device=DEV, dtype=dtype, requires_grad=True) if bias else None
            torch.cuda.synchronize()
            before = alloc()
            y = F.linear(x, w, b)
            torch.cuda.synchronize()
            forward = alloc() - before - _block_bytes(y)
            gy = torch.ones_like(y)
            torch.cuda.synchronize()
            before = alloc()
            y.backward(gy)
            torch.cuda.synchronize()
            backward = alloc() - before - _block_bytes(x.grad, w.grad, b.grad if bias else None)
        held = alloc()
        if clear:
            clear()
        torch.cuda.synchronize()
        return {
            "forward_thread_bytes": forward,
            "autograd_thread_bytes": backward,
            "released_by_clear_bytes": held - alloc() if clear else None,
        }

    rows = out["gemm"] = []
    for dtype in (torch.float32, torch.bfloat16):
        for bias in (False, True):
            row = {
                "dtype": str(dtype).removeprefix("torch."),
                "op": "addmm (linear with bias)" if bias else "mm (linear, no bias)",
            }
            try:
                row.update(gemm(dtype, bias))
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            rows.append(row)
            print(f"  workspace gemm {row}", flush=True)
    # One stream, no clearing between: does a later GEMM of another dtype or path take a workspace of its own?
    seq = out["gemm_sequence"] = []
    if clear:
        clear()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for dtype in (torch.float32, torch.bfloat16):
            for bias in (False, True):
                x = torch.randn(512, 1024, device=DEV, dtype=dtype)
                w = torch.randn(1024, 1024, device=DEV, dtype=dtype)
                b = torch.randn(1024, device=DEV, dtype=dtype) if bias else None
                torch.cuda.synchronize()
                before = alloc()
                y = F.linear(x, w, b)
                torch.cuda.synchronize()
                seq.append(
                    {
                        "dtype": str(dtype).removeprefix("torch."),
                        "bias": bias,
                        "new_bytes": alloc() - before - _block_bytes(y),
                    }
                )
                x = w = b = y = None
    _free()

    convs = out["conv"] = []
    for name, cin, cout, hw, k, stride, groups, input_grad in WORKSPACE_CONVS:
        for dtype in (torch.float32, torch.bfloat16):
            if budget.left() < 2:
                convs.append({"name": name, "skipped": "out of time"})
                continue
            row = {
                "name": name,
                "dtype": str(dtype).removeprefix("torch."),
                "batch": TRAIN_BATCH,
                "shape": [cin, cout, hw, k, stride, groups],
                "input_grad": input_grad,
            }
            try:
                x = torch.randn(TRAIN_BATCH, cin, hw, hw, device=DEV, dtype=dtype, requires_grad=input_grad)
                w = torch.randn(cout, cin // groups, k, k, device=DEV, dtype=dtype, requires_grad=True)
                pad = (k - 1) // 2 if stride < k else 0
                y, held, peak = _peak_run(lambda: F.conv2d(x, w, stride=stride, padding=pad, groups=groups))
                row["forward_transient_bytes"] = peak - _block_bytes(y)
                row["forward_kept_bytes"] = held - _block_bytes(y)
                gy = torch.randn_like(y)
                grads, _, peak = _peak_run(lambda: torch.autograd.grad(y, (x, w) if input_grad else (w,), gy))
                row["backward_transient_bytes"] = peak - _block_bytes(*grads)
                row["out_bytes"] = _block_bytes(y)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            finally:
                x = w = y = gy = grads = None
                _free()
            convs.append(row)
        print(
            f"  workspace conv {name}: {[(r.get('forward_transient_bytes'), r.get('backward_transient_bytes')) for r in convs[-2:]]}",
            flush=True,
        )

    norms = out["batch_norm"] = []
    for dtype in (torch.float32, torch.bfloat16):  # autocast leaves batch_norm in its input's dtype, fp32 weights
        row = {"name": "batch_norm train C64 @112", "dtype": str(dtype).removeprefix("torch.")}
        try:
            bn = torch.nn.BatchNorm2d(64).to(DEV).train()
            x = torch.randn(TRAIN_BATCH, 64, 112, 112, device=DEV, dtype=dtype, requires_grad=True)
            y, kept, peak = _peak_run(lambda: bn(x))
            row["forward_transient_bytes"] = peak - kept
            row["forward_kept_bytes"] = kept  # the output and what batch norm saves (mean, invstd, reserve)
            row["out_bytes"] = _block_bytes(y)
            gy = torch.randn_like(y)
            grads, _, peak = _peak_run(lambda: torch.autograd.grad(y, (x, bn.weight, bn.bias), gy))
            row["backward_transient_bytes"] = peak - _block_bytes(*grads)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            bn = x = y = gy = grads = None
            _free()
        norms.append(row)
    print(f"  workspace batch_norm: {norms}", flush=True)


def section_families(results: dict, budget: Budget, plan_data: dict) -> None:
    """`archlint calibrate --families --device-spec h200` in float16 at the latency table's batch
    (archlint.model.estimating.calibration; the cases are archlint.model.estimating.families'): each case's ms and share
    of the h200 spec's roofs, and the TOML it prints ([achieved], launch-overhead-us, host-op-us,
    size-share, their sources) ready to paste into archlint/devices/h200.toml. It runs whole
    (well under a minute), past its share of the budget if need be."""
    import torch

    from archlint.devices import resolve
    from archlint.model.estimating.calibration import measure, to_toml

    result = measure(torch.device(DEV), torch.float16, LATENCY_BATCH, 10, resolve("h200"))
    results["families"] = {
        "rows": result["rows"],
        "curve": result["curve"],
        "host_op_us": result["host"],
        "toml": to_toml(result),
    }
    print(results["families"]["toml"], flush=True)
    _free()


def section_step_time(results: dict, budget: Budget, plan_data: dict) -> None:
    import torch

    from archlint.model.train.memory import make_optimizer, step_loss

    rows = results.setdefault("step_time", [])
    for name in STEP_TIME_MODELS:
        for precision in ("float32", "bf16-autocast"):
            if budget.left() < 4:
                rows.append({"model": name, "precision": precision, "skipped": "out of time"})
                continue
            row = {"model": name, "precision": precision, "optimizer": "adamw", "batch": 2 * train_batch(name)}
            try:
                model, args, kwargs = build(name, 2 * train_batch(name), DEV)
                model.train()
                opt = make_optimizer("adamw", [p for p in model.parameters() if p.requires_grad])
                parts = {"forward_ms": [], "backward_ms": [], "optimizer_ms": []}
                for i in range(7):
                    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
                    opt.zero_grad(set_to_none=True)
                    ev[0].record()
                    with torch.autocast(DEV, dtype=torch.bfloat16, enabled=precision != "float32"):
                        loss = step_loss(model(*args, **kwargs))
                    ev[1].record()
                    loss.backward()
                    ev[2].record()
                    opt.step()
                    ev[3].record()
                    ev[3].synchronize()
                    if i >= 2:
                        for k, (a, b) in zip(parts, ((0, 1), (1, 2), (2, 3))):
                            parts[k].append(ev[a].elapsed_time(ev[b]))
                row.update({k: statistics.median(v) for k, v in parts.items()})
                row["step_ms"] = sum(row[k] for k in parts)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            finally:
                model = opt = args = kwargs = loss = None
                _free()
            rows.append(row)
        print(f"  step_time {name}: {[r.get('step_ms', r.get('error')) for r in rows[-2:]]}", flush=True)


def _archlint(args: list[str], timeout: float, output: Path) -> dict:
    """archlint run as a user runs it; its whole output in `output`, the end of it in the results."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "archlint", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        output.write_text(proc.stdout)
        return {
            "args": args,
            "rc": proc.returncode,
            "stdout_file": output.name,
            "stdout_tail": proc.stdout[-2000:],
            "stderr": proc.stderr[-3000:],
            "s": time.perf_counter() - start,
        }
    except subprocess.TimeoutExpired:
        return {"args": args, "rc": None, "timeout": timeout}


def section_cli(results: dict, budget: Budget, plan_data: dict, out: Path) -> None:
    zoo = out / "zoo.py"
    zoo.write_text("import torchvision\n\ndef resnet50():\n    return torchvision.models.resnet50(weights=None)\n")
    fast = ["--warmup", "3", "--repeat", "10", "-q", "--exit-zero"]
    shape = ["--input-shape", "32,3,224,224"]
    rows = results.setdefault("cli", [])
    for args in (
        [
            f"{zoo}:resnet50",
            *shape,
            "--latency",
            "--device",
            "cuda",
            "--device-spec",
            "h200",
            *fast,
            "--output-format",
            "json",
        ],
        [
            f"{zoo}:resnet50",
            *shape,
            "--train",
            "--latency",
            "--device",
            "cuda",
            "--device-spec",
            "h200",
            *fast,
            "--output-format",
            "json",
        ],
        [f"{zoo}:resnet50", *shape, "--latency", "--device", "cuda", "--trace", str(out / "trace"), *fast],
        ["trace", str(out / "trace"), "--output-format", "json"],
    ):
        if budget.left() < 10:
            rows.append({"args": args, "skipped": "out of time"})
            continue
        rows.append(_archlint(args, min(90, budget.left() - 5), out / f"cli{len(rows)}.txt"))
        print(f"  cli {' '.join(args[:3])}: rc {rows[-1].get('rc')} in {rows[-1].get('s', 0):.1f} s", flush=True)


def section_rule_prices(results: dict, budget: Budget, plan_data: dict) -> None:
    """AL611's and AL403's step prices against the step timed (benchmarks/train_rule_prices.py)."""
    if budget.left() < 20:
        results["rule_prices"] = {"skipped": "out of time"}
        return
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/train_rule_prices.py",
            "--device",
            "cuda",
            "--device-spec",
            "h200",
            "--models",
            "mlp,resnet50,vit_b_16",
        ],
        capture_output=True,
        text=True,
        timeout=max(10, budget.left() - 5),
        cwd=ROOT,
    )
    results["rule_prices"] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-4000:]}
    print("  rule_prices: rc " + str(proc.returncode), flush=True)


def section_tests(results: dict, budget: Budget, plan_data: dict) -> None:
    if budget.left() < 20:
        results["tests"] = {"skipped": "out of time"}
        return
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "cuda",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/model/timing",
            "tests/loader/test_loader_cli.py",
        ],
        capture_output=True,
        text=True,
        timeout=max(10, budget.left() - 5),
        cwd=ROOT,
    )
    results["tests"] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-3000:]}
    print("  tests: " + (proc.stdout.strip().splitlines() or ["?"])[-1], flush=True)


SECTIONS = [
    "env",
    "peaks",
    "latency",
    "memory",
    "max_batch",
    "alloc_trace",
    "workspace",
    "families",
    "tests",
    "step_time",
    "cli",
    "rule_prices",
]
# Each section's share of the budget (what it may use before the next starts; unused time carries on).
SHARES = {
    "env": 0.01,
    "peaks": 0.04,
    "latency": 0.25,
    "memory": 0.20,
    "max_batch": 0.10,
    "alloc_trace": 0.03,
    "workspace": 0.02,
    "families": 0.05,
    "tests": 0.10,
    "step_time": 0.07,
    "cli": 0.08,
    "rule_prices": 0.05,
}


def run(plan_path: Path, out: Path, seconds: float, only: list[str] | None, latency_from: int = 0) -> None:
    os.environ.setdefault("ARCHLINT_CACHE_DIR", str(out / "cache"))
    plan_data = {**json.loads(plan_path.read_text()), "latency_from": latency_from}
    results: dict = {"budget_s": seconds, "timings": {}}
    start = time.monotonic()
    path = out / "gpu_checks.json"
    for i, name in enumerate(SECTIONS):
        if only and name not in only and name != "env":
            continue
        used = time.monotonic() - start
        share = sum(SHARES[s] for s in SECTIONS[: i + 1]) * seconds
        budget = Budget(max(share - used, 0) if name != "env" else 60)
        t0 = time.monotonic()
        print(f"[{used:5.0f} s] {name} (up to {budget.left():.0f} s)", flush=True)
        try:
            fn = globals()[f"section_{name}"]
            fn(results, budget, plan_data, out) if name == "cli" else fn(results, budget, plan_data)
        except Exception as exc:  # one section's failure costs only that section; said in the results
            import traceback

            results.setdefault("errors", {})[name] = traceback.format_exc()[-2000:]
            print(f"  {name} FAILED: {type(exc).__name__}: {exc}", flush=True)
        results["timings"][name] = time.monotonic() - t0
        path.write_text(json.dumps(results, indent=1, default=str))
    write_table(results, out / "timm-infer-amp-nchw-h200-archlint.csv")
    print(f"done in {time.monotonic() - start:.0f} s; results in {path}")


def write_table(results: dict, path: Path) -> None:
    """The latency rows in the published tables' columns (benchmarks/eval_data/published)."""
    rows = [r for r in results.get("latency", []) if "samples_per_s" in r]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "infer_img_size", "infer_samples_per_sec", "infer_batch_size"])
        for r in rows:
            w.writerow([r["model"], r["img"], f"{r['samples_per_s']:.2f}", r["batch"]])


# ---- report (CPU) -------------------------------------------------------------------------


def report_memory(results: dict) -> None:
    """archlint's memory model (meta, the h200 spec) at the same batch beside the GPU's counters:
    peak_bytes against torch.cuda.max_memory_allocated, the caching allocator replayed
    (allocator.reserved_peak_bytes) against max_memory_reserved, and the old packed lower bound."""
    from archlint.devices import resolve
    from archlint.model.train.memory import step_memory

    spec = resolve("h200")
    rows = [r for r in results.get("memory", []) if "max_allocated_bytes" in r]
    within = {"allocated": 0, "reserved": 0}
    ratios: dict[str, list[float]] = {"allocated": [], "reserved": []}
    worst: dict[str, list] = {"allocated": [], "reserved": []}
    print(
        f"\n{'model':28} {'opt':6} {'allocated GB':>12} {'archlint':>9} {'ratio':>6}  {'reserved GB':>11} {'replayed':>9} {'ratio':>6} {'packed':>7}"
    )
    for r in rows:
        model, args, kwargs = build(r["model"], r["batch"], "cpu")
        m = step_memory(model.train(), args, kwargs, optimizer=r["optimizer"], device_spec=spec)
        alloc = m["peak_bytes"] / r["max_allocated_bytes"]
        reserved = m["allocator"]["reserved_peak_bytes"] / r["max_reserved_bytes"]
        packed = m["allocator"]["reserved_at_peak_bytes_lower_bound"] / r["max_reserved_bytes"]
        for key, ratio in (("allocated", alloc), ("reserved", reserved)):
            within[key] += abs(ratio - 1) <= 0.10
            ratios[key].append(ratio)
            worst[key].append((abs(ratio - 1), f"{r['model']}/{r['optimizer']} {ratio:.3f}"))
        print(
            f"{r['model']:28} {r['optimizer']:6} {r['max_allocated_bytes'] / 1e9:12.3f} {m['peak_bytes'] / 1e9:9.3f} {alloc:6.3f}  "
            f"{r['max_reserved_bytes'] / 1e9:11.3f} {m['allocator']['reserved_peak_bytes'] / 1e9:9.3f} {reserved:6.3f} {packed:7.3f}",
            flush=True,
        )
    for key in within:
        print(
            f"{key}: within 10% {within[key]}/{len(rows)}; worst: {', '.join(w for _, w in sorted(worst[key], reverse=True)[:4])}"
        )
    if not rows:
        return
    if not all(r.get("cublas_workspaces_cleared") for r in rows):
        print(
            "note: rows measured without clearing cuBLAS's workspaces between models carry those of the models "
            "before them (a model without a GEMM, squeezenet1_0, then shows 65 MiB that archlint rightly leaves out)"
        )
    from archlint.model.train.fit import ALLOCATED_HIGH, ALLOCATED_LOW

    low, high = min(ratios["allocated"]), max(ratios["allocated"])
    print(
        f"max_batch's margins: archlint/allocated lowest {low:.3f} (fit.ALLOCATED_LOW = {ALLOCATED_LOW}: "
        f"{'covers it' if ALLOCATED_LOW <= low else 'DOES NOT cover it'}), highest {high:.3f} "
        f"(fit.ALLOCATED_HIGH = {ALLOCATED_HIGH}: {'covers it' if ALLOCATED_HIGH >= high else 'DOES NOT cover it'})"
    )


def report_max_batch(results: dict) -> None:
    """archlint's max_batch_range claims (max_batch, its low end, fits; none above its high end
    does) against the trials, max_batch and max_batch + 1 shown where they fell; and for each
    batch that fitted, archlint's peak_bytes against its max_memory_allocated (the ratio that
    fit.ALLOCATED_HIGH must cover)."""
    from archlint.devices import resolve
    from archlint.model.train.fit import ALLOCATED_HIGH
    from archlint.model.train.memory import step_memory

    spec = resolve("h200")
    for key in ("max_batch", "max_batch_v2"):  # v2: a second run kept beside the first in a merged file
        rows = [r for r in results.get(key, []) if "tried" in r]
        if not rows:
            continue
        held = claims = 0
        ratios, off = [], []
        print(
            f"\n{key}:\n{'model':28} {'opt':6} {'budget':>7} {'range':>11} {'max_batch':>9}  tried (batch: fits?, claim; archlint/allocated)"
        )
        for r in rows:
            parts = []
            for batch, t in sorted(r["tried"].items(), key=lambda kv: int(kv[0])):
                got = "skipped" if "skipped" in t else "error" if "error" in t else "fits" if t["fits"] else "OOM"
                claim = t.get("claim", "")
                if claim and got in ("fits", "OOM"):
                    claims += 1
                    ok = (got == "fits") == (claim == "fits")
                    held += ok
                    got += f" (claimed {claim}: {'held' if ok else 'WRONG'})"
                point = int(batch) in (r["max_batch"], r["max_batch"] + 1)
                if t.get("max_allocated_bytes") and (claim or point):  # not the bisection's own trials
                    model, args, kwargs = build(r["model"], int(batch), "cpu")
                    m = step_memory(model.train(), args, kwargs, optimizer=r["optimizer"], device_spec=spec)
                    ratios.append((m["peak_bytes"] / t["max_allocated_bytes"], f"{r['model']}@{batch}"))
                    got += f" {ratios[-1][0]:.3f}"
                parts.append(f"{batch}: {got}")
            rng = r.get("max_batch_range")
            print(
                f"{r['model']:28} {r['optimizer']:6} {r['budget_bytes'] / 1e9:5.0f}GB {str(rng):>11} {r['max_batch']:9}  {'; '.join(parts)}",
                flush=True,
            )
            real = r.get("real_max_batch")
            if real:
                off.append((r["max_batch"] - real, r["model"]))
                print(
                    f"{'':28} real largest batch {real}: archlint's max_batch {r['max_batch'] - real:+d} "
                    f"({(r['max_batch'] - real) / real:+.1%})"
                )
        print(f"max_batch claims held: {held}/{claims}")
        if off:
            print(
                f"max_batch - real largest batch: {', '.join(f'{m} {d:+d}' for d, m in off)}; "
                f"exact {sum(d == 0 for d, _ in off)}/{len(off)}, too high (does not fit) {sum(d > 0 for d, _ in off)}"
            )
        if ratios:
            top = max(ratios)
            print(
                f"peak_bytes / max_memory_allocated at the batches that fitted: highest {top[0]:.3f} ({top[1]}); "
                f"fit.ALLOCATED_HIGH = {ALLOCATED_HIGH} {'covers it' if top[0] <= ALLOCATED_HIGH else 'DOES NOT cover it'}"
            )
        report_max_batch_now(rows)


def report_max_batch_now(rows: list[dict]) -> None:
    """archlint's max_batch and range as this checkout computes them (the plan's were the code of the
    run), beside the real largest batch: the point exact, off by how much; the range's claims (its low
    end fits, its high end + 1 does not) against the real largest batch."""
    from archlint.devices import resolve
    from archlint.model.train.fit import fit_report

    spec = resolve("h200")
    off, held, claims = [], 0, 0
    print(f"\nthis checkout's max_batch:\n{'model':28} {'opt':6} {'real':>5} {'max_batch':>9} {'range':>11}")
    for r in rows:
        real = r.get("real_max_batch")
        if not real:
            continue
        model, args, kwargs = build(r["model"], train_batch(r["model"]), "cpu")
        now = fit_report(
            model.train(), args, kwargs, optimizer=r["optimizer"], budget_bytes=r["budget_bytes"], device_spec=spec
        )
        low, high = now.get("max_batch_range") or (None, None)
        ok = [low is not None and low <= real, high is not None and high + 1 > real]
        held, claims = held + sum(ok), claims + 2
        off.append((now["max_batch"] - real, r["model"]))
        print(
            f"{r['model']:28} {r['optimizer']:6} {real:5} {now['max_batch']:9} {str([low, high]):>11}  "
            f"{now['max_batch'] - real:+d}; claims {'held' if all(ok) else 'WRONG'}",
            flush=True,
        )
    if off:
        print(
            f"max_batch - real largest batch: {', '.join(f'{m} {d:+d}' for d, m in off)}; exact {sum(d == 0 for d, _ in off)}/"
            f"{len(off)}, within 2 {sum(abs(d) <= 2 for d, _ in off)}, too high {sum(d > 0 for d, _ in off)}; "
            f"range claims held {held}/{claims}"
        )


def report_workspace(results: dict) -> None:
    """What the workspace section measured: cuBLAS's kept workspaces per thread, and the transient
    workspaces of cuDNN's convolutions and batch norm (MiB)."""
    ws = results.get("workspace", {})
    if "config" not in ws:
        print(f"\nworkspace: {ws.get('skipped', 'not measured')}")
        return
    mib = lambda b: "-" if b is None else f"{b / 2**20:.2f}"  # noqa: E731
    print(f"\nworkspace config: {ws['config']}")
    for r in ws.get("gemm", []):
        print(
            f"  gemm {r['dtype']:9} {r['op']:26} forward thread +{mib(r.get('forward_thread_bytes'))} MiB, "
            f"autograd thread +{mib(r.get('autograd_thread_bytes'))} MiB, released by clear {mib(r.get('released_by_clear_bytes'))}"
            + (f" ERROR {r['error']}" if "error" in r else "")
        )
    print(
        "  one stream, in turn: "
        + ", ".join(
            f"{r['dtype']} {'addmm' if r['bias'] else 'mm'} +{mib(r['new_bytes'])}" for r in ws.get("gemm_sequence", [])
        )
    )
    print(f"  {'conv (batch 32)':48} {'dtype':9} {'out MiB':>8} {'fwd ws':>8} {'bwd ws':>8}")
    for r in ws.get("conv", []) + ws.get("batch_norm", []):
        if "error" in r or "skipped" in r:
            print(f"  {r['name']:48} {r.get('dtype', ''):9} {r.get('error', r.get('skipped'))}")
            continue
        print(
            f"  {r['name']:48} {r['dtype']:9} {mib(r.get('out_bytes')):>8} {mib(r.get('forward_transient_bytes')):>8} "
            f"{mib(r.get('backward_transient_bytes')):>8}"
        )


def report_latency(results: dict) -> None:
    """archlint's --device-spec h200 estimate (AMP float16, the published evaluation's way) against
    the measured throughput: Spearman ρ, median error, share within 2×, and FLOPs alone; the
    spec's own measured shares ([achieved]) against the built-in ones (A100 trace, FlashAttention-2)."""
    import tempfile

    from published_accuracy import evaluate, scores, spearman

    from archlint.devices import DIR

    torch_version = results.get("env", {}).get("torch", "").split("+")[0]
    rows = [
        {
            "model": r["model"],
            "img": r["img"],
            "batch": r["batch"],
            "published": r["samples_per_s"],
            "torch": torch_version,
        }
        for r in results.get("latency", [])
        if "samples_per_s" in r
    ]
    text = (DIR / "h200.toml").read_text(encoding="utf-8")
    assert "\n[achieved]" in text, "h200.toml has no [achieved] table"
    kept, table = [], ""
    for line in text.splitlines():  # the spec less its [achieved] table and that table's source
        table = line.split("]")[0].lstrip("[") if line.startswith("[") else table
        if table != "achieved" and not line.startswith("achieved = "):
            kept.append(line)
    builtin = "\n".join(kept) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "h200-builtin-shares.toml"
        spec_file.write_text(builtin)
        shares = {
            "built-in shares": evaluate(rows, str(spec_file), per_model=False),
            "h200 [achieved]": evaluate(rows, "h200", per_model=True),
        }
    for half, part in (("all", slice(None)), ("first 45", slice(0, 45)), ("next 45", slice(45, None))):
        sample = {k: v[part] for k, v in shares.items()}
        some = next(iter(sample.values()))
        if len(some) < 3:
            continue
        pub = [r["published"] for r in some]
        print(
            f"\nH200 measured (timm benchmark: AMP fp16, NCHW, eager, batch {LATENCY_BATCH}), {half}: {len(some)} models"
        )
        print(f"  FLOPs alone:  ρ {spearman([-r['flops'] / r['batch'] for r in some], pub):.3f}")
        print(f"  roofline only: {scores(some, 'before')}")
        for name, got in sample.items():
            inside = sum(r["range"][0] <= r["published"] <= r["range"][1] for r in got) / len(got)
            print(f"  {name:16s} {scores(got, 'after')}  measured inside the range {inside:.0%}")


def report_step_time(results: dict) -> None:
    """archlint's --train --device-spec h200 estimate of the step (forward, backward, optimizer;
    float32 and its autocast estimate) beside the step timed on the GPU."""
    import archlint

    measured = {(r["model"], r["precision"]): r for r in results.get("step_time", []) if "step_ms" in r}
    print(f"\n{'model':24} {'precision':13} {'measured ms fwd/bwd/opt':>28} {'estimated ms fwd/bwd/opt':>28}  ratio")
    ratios = []
    for name in STEP_TIME_MODELS:
        if (name, "float32") not in measured:
            continue
        model, args, kwargs = build(name, measured[(name, "float32")]["batch"], "cpu")
        inputs = (*args, kwargs) if kwargs else args
        doc = archlint.analyze(model, *inputs, train=True, optimizer="adamw", device_spec="h200", name=name).to_dict()
        train = doc["models"][0]["estimate"]["train"]
        for precision, est in (("float32", train), ("bf16-autocast", train.get("autocast"))):
            m = measured.get((name, precision))
            if not m or not est:
                continue
            ratio = est["step_ms"] / m["step_ms"]
            ratios.append((name, precision, ratio))
            print(
                f"{name:24} {precision:13} {m['forward_ms']:8.2f} {m['backward_ms']:8.2f} {m['optimizer_ms']:8.2f}  "
                f"{est['forward_ms']:8.2f} {est['backward_ms']:8.2f} {est['optimizer_ms']:8.2f}  {ratio:5.2f}",
                flush=True,
            )
    if ratios:
        errs = sorted(abs(r - 1) for *_, r in ratios)
        print(
            f"step estimate / measured: median error {errs[len(errs) // 2]:.0%}, within 2×: "
            f"{sum(0.5 <= r <= 2 for *_, r in ratios)}/{len(ratios)}"
        )


def report(results_path: Path, only: list[str] | None) -> None:
    raw = gzip.decompress(results_path.read_bytes()) if results_path.suffix == ".gz" else results_path.read_bytes()
    results = json.loads(raw)
    env = results.get("env", {})
    print(
        f"{env.get('gpu')}: torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
        f"context {env.get('context_bytes', 0) / 2**20:.0f} MiB"
    )
    for name, fn in (
        ("workspace", report_workspace),
        ("memory", report_memory),
        ("max_batch", report_max_batch),
        ("latency", report_latency),
        ("step_time", report_step_time),
    ):
        if not only or name in only:
            fn(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--out", type=Path, default=ROOT / ".gpu" / "plan.json")
    r = sub.add_parser("run")
    r.add_argument("--plan", type=Path, default=ROOT / ".gpu" / "plan.json")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--budget-s", type=float, default=420)
    r.add_argument("--only", help="comma-separated sections")
    r.add_argument("--latency-from", type=int, default=0, help="time the latency sample from this row on")
    p = sub.add_parser("report")
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--only", help="memory, max_batch, workspace, latency, step_time")
    ns = parser.parse_args()
    if ns.step == "plan":
        plan(ns.out)
    elif ns.step == "report":
        report(ns.results, ns.only.split(",") if ns.only else None)
    else:
        ns.out.mkdir(parents=True, exist_ok=True)
        run(ns.plan, ns.out, ns.budget_s, ns.only.split(",") if ns.only else None, ns.latency_from)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
