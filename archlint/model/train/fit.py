"""Whether a training batch fits a memory budget, the largest batch that does, and the ways to fit.

Everything is found with the memory model (`step_memory`, on meta), never by trial on hardware:
the step's peak is affine in the batch for most models (activations and temporaries grow with it,
weights, gradients and optimizer state do not), so two evaluations give the line, the line gives
the largest batch, and evaluations at that batch and the next confirm it (or walk to the answer).
The ways to fit are measured the same way: the memory model is run with each change applied (activation
checkpointing of chosen blocks, a fused optimizer, bitsandbytes' 8-bit state, bf16 autocast's
cast policy, a smaller micro-batch with gradient accumulation), under the same budget, so a way
"fits" exactly when its own figure is within the budget.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode
from torch.utils._pytree import tree_flatten, tree_map

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.errors import UsageError
from archlint.model.train import meta_shims
from archlint.model.train.autocast_meta import BASIS as AUTOCAST_BASIS
from archlint.model.train.eightbit import BASIS as EIGHT_BIT_BASIS
from archlint.model.train.memory import step_memory, to_meta
from archlint.train_names import parse_optimizer
from archlint.units import bytes_against

CODE = "AL610"
MAX_EVALUATIONS = 16
REAL_INPUT_BYTES = 256 << 20  # with_batch: a larger floating-point input is made on meta
# How far the memory model is from a real GPU, measured on an H200 (benchmarks/gpu_checks.py
# `report --only memory,max_batch` on benchmarks/eval_data/measured/h200-gpu-checks-2026-11-26-alloc.json.gz):
# peak_bytes was 0.968 to 1.098 of torch.cuda.max_memory_allocated (63 steps: 21 models x
# sgd/adam/adamw at batch 32, 0.968-1.036; and the 17 max_batch trials that fitted, highest GPT-2 with
# eager attention at batch 7). Rounded outward. A batch is held to the caching allocator replayed under
# the budget (less the CUDA context); the margins scale that limit: under the limit times
# ALLOCATED_LOW the step fits even if every storage is 1/0.96 of the model's (max_batch: sure to fit),
# and a batch that runs out under the limit times ALLOCATED_HIGH does not fit even if every storage
# is 1/1.10 of it (max_batch_range's high end).
ALLOCATED_LOW = 0.96
ALLOCATED_HIGH = 1.10
MARGIN_SOURCE = ("measured on an H200 (benchmarks/gpu_checks.py, 63 training steps and 17 max_batch trials): "
                 f"peak_bytes {ALLOCATED_LOW}-{ALLOCATED_HIGH} x torch.cuda.max_memory_allocated")


def device_memory(spec) -> tuple[int, str] | None:
    """The device's memory in bytes and where the figure comes from, or None (a CPU spec, or a
    GPU spec that does not give memory-gib)."""
    memory = getattr(spec, "memory_bytes", None) if getattr(spec, "kind", "") == "gpu" else None
    if memory is None:
        return None
    return memory, f"device spec {spec.name}: memory-gib ({memory / 2**30:g} GiB)"


def batch_size(args: tuple, kwargs: dict) -> int:
    """The batch: the leading dimension shared by the input tensors (the first tensor's)."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.dim() > 0]
    if not tensors:
        raise UsageError("no input tensor with a batch dimension: cannot size the batch")
    return tensors[0].shape[0]


def with_batch(args: tuple, kwargs: dict, batch: int) -> tuple[tuple, dict]:
    """Inputs like these with the batch dimension (every tensor's leading one that equals the
    batch) set to `batch`: meta stays meta; a real tensor's rows are repeated in turn, so token
    ids stay in the vocabulary and masks keep their values when the step must run on real
    tensors (a model the meta device cannot run). A floating-point input that would take over
    REAL_INPUT_BYTES becomes meta: the meta step reads no input's data but ids and masks, and the
    search for max_batch reaches batches whose inputs this machine could not hold (an MLP on an
    80 GB budget: tens of millions of rows)."""
    old = batch_size(args, kwargs)

    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.dim() == 0 or t.shape[0] != old:
            return t
        big = t.is_floating_point() and t.element_size() * (t.numel() // old) * batch > REAL_INPUT_BYTES
        if t.device.type == "meta" or big:
            return torch.empty((batch, *t.shape[1:]), dtype=t.dtype, device="meta").requires_grad_(t.requires_grad)
        return t.detach()[torch.arange(batch, device=t.device) % old].requires_grad_(t.requires_grad)
    return tree_map(one, tuple(args)), tree_map(one, dict(kwargs))


def total_peak(result: dict) -> int:
    return result.get("device_peak_bytes", result["peak_bytes"])


def budget_peak(result: dict) -> int:
    """What the budget is held to: what the device needs (`needed_bytes`: on a GPU spec the allocator
    replayed under the budget less the context, as PyTorch runs under set_per_process_memory_fraction,
    and the context; otherwise the peak); `fits` is this within the budget."""
    return result.get("needed_bytes", total_peak(result))


def scaled_peak(result: dict, scale: float) -> int:
    """For max_batch's search on a GPU spec: over the budget if the allocator replayed under the
    limit times `scale` (one of step_memory's limit_scales) ran out, within it if not; the live
    bytes over `scale` and the context say by how much (they grow smoothly with the batch, where
    the segments go in steps)."""
    run = next(run for run in result["allocator"]["under_budget"]["scaled"] if run["scale"] == scale)
    smooth, budget = math.ceil(result["peak_bytes"] / scale) + result["allocator"]["cuda_context_bytes"], result["budget_bytes"]
    return max(smooth, budget + 1) if run["out_of_memory"] else min(smooth, budget)


def max_batch(peak_at: Callable[[int], int], batch: int, budget: int, bisect: bool = False) -> dict:
    """The largest batch whose peak is within `budget`: the line through two evaluations, then
    evaluations at the predicted batch and the next to confirm it (walking if the line was off).
    `bisect`: where a batch that fits and one that does not are known, halve between them (for a
    yes-or-no answer, such as an allocator replayed under a limit, whose bytes say little)."""
    seen: dict[int, int] = {}

    def peak(b: int) -> int:
        if b not in seen:
            if len(seen) >= MAX_EVALUATIONS:
                raise _OutOfEvaluations
            seen[b] = peak_at(b)
        return seen[b]
    b1, b2 = batch, 2 * batch
    slope = (peak(b2) - peak(b1)) / (b2 - b1)
    fixed = peak(b1) - slope * b1
    if slope <= 0:
        return {"max_batch": None, "per_sample_bytes": slope, "fixed_bytes": int(fixed),
                "evaluations": sorted(seen.items()), "basis": "the peak does not grow with the batch"}
    # The line's answer, then secant steps between the largest batch known to fit (lo) and the
    # smallest known not to (hi): the peak is piecewise affine (it moves from the optimizer step
    # to the backward as activations grow), so each step lands on the next piece or the answer.
    # On a GPU the reserved peak is a staircase (segments of 2 and 20 MiB), where secant steps
    # stall at one batch each: then steps double until a batch does not fit, and where a step
    # does not halve the bracket, the next halves it.
    guess = max(1, math.floor((budget - fixed) / slope))
    unresolved = None
    width, stride, stalled = math.inf, 2, False

    def bracket() -> tuple[int, int | None]:
        return (max((b for b, p in seen.items() if p <= budget), default=0),
                min((b for b, p in seen.items() if p > budget), default=None))
    while True:
        lo, hi = bracket()
        if hi is not None and hi - lo <= 1:
            break
        if hi is None:
            if stalled:
                guess, stride = max(guess, lo + stride), 2 * stride
            if guess <= lo:
                guess = 2 * lo
        elif bisect or not lo < guess < hi or hi - lo > width / 2:
            guess = (lo + hi) // 2
        width = hi - lo if hi is not None else math.inf
        try:
            peak(guess)
        except _OutOfEvaluations:
            unresolved = [lo + 1, hi - 1 if hi is not None else None]
            break
        new_lo, hi = bracket()
        stalled, lo = stalled or new_lo == lo + 1, new_lo  # once stalled, the steps keep doubling
        a, b = (sorted(seen)[:2] if lo == 0 else sorted(seen)[-2:] if hi is None else (lo, hi))
        rate = (seen[b] - seen[a]) / (b - a)
        guess = max(lo + 1, a + math.floor((budget - seen[a]) / rate)) if rate > 0 else -1
    basis = "memory model: peak affine in the batch from two evaluations, confirmed at the answer and the next batch"
    if unresolved:
        basis = (f"memory model: the largest batch evaluated that fits; batches {unresolved[0]} to "
                 f"{unresolved[1] if unresolved[1] is not None else 'more'} were not evaluated "
                 f"(the search stops after {MAX_EVALUATIONS} evaluations)")
    return {
        "max_batch": lo,
        "per_sample_bytes": int(slope),
        "fixed_bytes": int(fixed),
        "evaluations": [list(e) for e in sorted(seen.items())],
        "basis": basis,
    }


class _OutOfEvaluations(Exception):
    """The search used its MAX_EVALUATIONS evaluations of the memory model."""


def checkpoint_candidates(model: nn.Module) -> list[str]:
    """Repeated blocks: the children of a ModuleList or Sequential that holds two or more modules
    of one class (transformer layers, ResNet stages' blocks), outermost first found."""
    out = []
    for path, module in model.named_modules():
        if isinstance(module, (nn.ModuleList, nn.Sequential)):
            kinds = [type(c) for c in module.children()]
            for name, child in module.named_children():
                if kinds.count(type(child)) >= 2 and any(True for _ in child.parameters()):
                    out.append(f"{path}.{name}" if path else name)
    # the outermost only: a block inside a checkpointed block is recomputed with it
    return [p for p in out if not any(p.startswith(q + ".") for q in out)]


def forward_flops(model: nn.Module, args: tuple, kwargs: dict) -> dict[str, int]:
    """Multiply-adds of each module's forward (torch's FlopCounterMode on meta, which counts 2 FLOPs
    a multiply-add, halved to archlint's FLOPs), by module path."""
    root = type(model).__name__
    def meta(t):
        return torch.empty_like(t, device="meta") if isinstance(t, torch.Tensor) else t
    meta_args, meta_kwargs = tree_map(meta, tuple(args)), tree_map(meta, dict(kwargs))
    with torch.no_grad(), FlopCounterMode(display=False) as counter, _MetaShimmed():
        to_meta(model).train()(*meta_args, **meta_kwargs)
    flops = {}
    for key, counts in counter.get_flop_counts().items():
        if key.startswith(root + "."):
            flops[key[len(root) + 1:]] = int(sum(counts.values())) // 2
    return flops


class _MetaShimmed(TorchDispatchMode):
    """Ops the meta device refuses but the real one runs (`_grouped_mm` in float32: a Mixture of
    Experts) adapted as the memory model adapts them (archlint.model.train.meta_shims): without it,
    forward_flops raised on every MoE model that did not fit its budget (issue 45)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except RuntimeError as exc:
            return meta_shims.retry(func, args, kwargs, exc, lambda f, a, k: f(*a, **k), None)[0]


class _Checkpointed(nn.Module):
    """A block run under non-reentrant activation checkpointing (saves its inputs only)."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args, **kwargs):
        return checkpoint(self.block, *args, use_reentrant=False, **kwargs)

    def __getattr__(self, name: str):
        # the block's attributes stay reachable: a container may read them (nn.TransformerEncoder
        # checks its first layer's self_attn before running it)
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("block"), name)


def with_checkpoints(model: nn.Module, paths: list[str]) -> nn.Module:
    """A meta copy of `model` with the blocks at `paths` checkpointed."""
    copy_ = to_meta(model)
    for path in paths:
        parent_path, _, name = path.rpartition(".")
        parent = copy_.get_submodule(parent_path) if parent_path else copy_
        setattr(parent, name, _Checkpointed(getattr(parent, name)))
    return copy_


def _subtree(per_module: dict[str, int], path: str) -> int:
    return sum(b for m, b in per_module.items() if m == path or m.startswith(path + "."))


def ways_to_fit(model, args, kwargs, *, optimizer: str, loss: str, budget: int, device_spec, result: dict,
                fit: dict) -> list[Diagnostic]:
    """AL610 findings: the batch does not fit, and each way that makes it fit, priced in memory
    saved (share of the step's peak) and time added. Every way's figure is the memory model run
    with that change applied, under the same budget (`step_memory`'s `needed_bytes` and `fits`),
    never a saving subtracted from the step's figure: a way says "fits" exactly when its own
    figure is within the budget (`fits_after`)."""
    peak, batch = budget_peak(result), batch_size(args, kwargs)
    excess = peak - budget
    where = f"training step at batch {batch} with {optimizer}"
    found = []

    def changed(model_=model, args_=args, kwargs_=kwargs, optimizer_=optimizer, **change) -> dict:
        return step_memory(model_, args_, kwargs_, optimizer=optimizer_, loss=loss, budget_bytes=budget,
                           device_spec=device_spec, **change)

    def finding(way, message, after, alternative, *, added_flops=None, evidence=None,
                basis="measured by the memory model with the change applied"):
        needed = budget_peak(after)
        saved = peak - needed
        price = Price("static", saved / peak if peak else 0.0, alternative,
                      flops_saved=-added_flops if added_flops else None, whole="step peak memory")
        ev = {"way": way, "memory_saved_bytes": int(saved), "peak_bytes": peak, "budget_bytes": budget,
              "needed_after_bytes": int(needed), "fits_after": bool(after["fits"]), "saving_basis": basis}
        if added_flops is not None:
            ev["time_added_flops"] = int(added_flops)
        before, limit = bytes_against(peak, budget)
        after_text, limit_after = bytes_against(needed, budget)
        verdict = (f"the device then needs {after_text}: fits in {limit_after}" if after["fits"] else
                   f"the device then needs {after_text}: still over {limit_after}")
        found.append(Diagnostic(CODE, f"{where} needs {before} > budget {limit}: {message} ({verdict})",
                                Severity.WARNING, evidence=ev | (evidence or {}), price=price))

    # 1. Activation checkpointing, blocks chosen by activations saved per recompute FLOP.
    per_module = result.get("per_module_activations", {})
    candidates = checkpoint_candidates(model)
    if candidates:
        flops = forward_flops(model, args, kwargs)
        scored = sorted(((_subtree(per_module, p) / max(flops.get(p, 0), 1), p) for p in candidates
                         if _subtree(per_module, p) > 0), reverse=True)
        # Take blocks in order until their kept activations cover the excess; measure; when the
        # measured saving falls short (a block's output is kept by the next one anyway), aim
        # higher by the shortfall's ratio and measure again (at most three rounds).
        chosen, after, target = [], None, excess
        for _ in range(3):
            predicted, more = 0, []
            for _, path in scored:
                if predicted >= target:
                    break
                more.append(path)
                predicted += _subtree(per_module, path)
            if not more or more == chosen:
                break
            after = changed(with_checkpoints(model, more))
            chosen, saved = more, peak - budget_peak(after)
            if after["fits"] or saved <= 0:
                break
            target = predicted * excess / saved
        if chosen and after is not None and peak - budget_peak(after) > 0:
            # reported only when it saves (a peak in the optimizer step is not activations)
            recompute = sum(flops.get(p, 0) for p in chosen)
            finding("checkpoint", f"checkpointing {len(chosen)} block(s) costs {recompute / 1e9:.2f} GFLOP "
                    "of recomputation in backward", after,
                    f"torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) around {', '.join(chosen[:6])}"
                    + (f" and {len(chosen) - 6} more" if len(chosen) > 6 else ""),
                    added_flops=recompute, evidence={"blocks": chosen})

    # 2. A fused optimizer: no step temporaries; an 8-bit one: its state in uint8. Both measured.
    base, variant = parse_optimizer(optimizer)
    if variant != "fused" and base != "sgd":
        fused = changed(optimizer_=f"{base}-fused")
        if peak - budget_peak(fused) > 0:
            finding("fused-optimizer", f"the fused {base} makes no optimizer-step temporaries", fused,
                    f"torch.optim.{'AdamW' if base == 'adamw' else 'Adam' if base == 'adam' else 'SGD'}(..., fused=True)",
                    added_flops=0)
    if base in ("adam", "adamw") and result["optimizer_bytes"]:
        eight = changed(eight_bit=True)
        if peak - budget_peak(eight) > 0:
            finding("8bit-optimizer", f"an 8-bit {base} keeps its two moments in 1 byte each instead of 4", eight,
                    f"bitsandbytes.optim.{'AdamW8bit' if base == 'adamw' else 'Adam8bit'}(model.parameters())",
                    added_flops=0, basis=f"measured by the memory model with {EIGHT_BIT_BASIS}",
                    evidence={"optimizer_bytes": result["optimizer_bytes"],
                              "optimizer_bytes_after": eight["optimizer_bytes"]})

    # 3. bf16 autocast: matmul/conv outputs (most saved activations) in 2 bytes instead of 4.
    if result["at_peak"]["activations"] + result["at_peak"]["temporaries"]:
        amp = changed(autocast=torch.bfloat16)
        if peak - budget_peak(amp) > 0:
            finding("autocast", "bf16 autocast keeps matmul and conv outputs in 2 bytes", amp,
                    f"with torch.autocast('{'cuda' if getattr(device_spec, 'kind', '') == 'gpu' else 'cpu'}', "
                    "dtype=torch.bfloat16): loss = model(x) ...", added_flops=0,
                    basis="measured by the memory model with " + AUTOCAST_BASIS.format(dtype="bfloat16"))

    # 4. Gradient accumulation over micro-batches sure to fit.
    micro = fit.get("max_batch")
    if micro and micro < batch:
        steps = math.ceil(batch / micro)
        small_args, small_kwargs = with_batch(args, kwargs, micro)
        small = changed(args_=small_args, kwargs_=small_kwargs)
        finding("accumulation", f"{steps} micro-batches of {micro} with gradient accumulation: the same work, "
                "in smaller launches", small,
                f"for chunk in x.split({micro}): (loss_fn(model(chunk)) / {steps}).backward(); then optimizer.step()",
                added_flops=0, evidence={"micro_batch": micro, "accumulation_steps": steps})
    return found


def _free_memory() -> int | None:
    """The bytes of memory this machine has free (Linux, macOS: sysconf), None where it cannot say."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def fit_report(model, args, kwargs, *, optimizer: str = "adam", loss: str = "mean", budget_bytes: int | None = None,
               device_spec=None) -> tuple[dict, list[Diagnostic]]:
    """The step's memory with `fits`, `max_batch` and, when it does not fit, the AL610 findings.
    The budget is `budget_bytes`, else the device spec's memory."""
    budget_source = "--memory-budget"
    if budget_bytes is None:
        memory = device_memory(device_spec)
        if memory is None:
            raise UsageError("no memory budget: give --memory-budget SIZE or a GPU --device-spec")
        budget_bytes, budget_source = memory
    gpu = getattr(device_spec, "kind", "") == "gpu"  # the allocator replayed: max_batch allows for its error
    scales = (ALLOCATED_LOW, ALLOCATED_HIGH) if gpu else ()
    result = step_memory(model, args, kwargs, optimizer=optimizer, loss=loss, budget_bytes=budget_bytes,
                         device_spec=device_spec, limit_scales=scales)
    result["budget_source"] = budget_source
    memory_at = {batch_size(args, kwargs): result}

    def peak_at(b: int, scale: float | None = None) -> int:
        if b not in memory_at:
            a, k = with_batch(args, kwargs, b)
            memory_at[b] = step_memory(model, a, k, optimizer=optimizer, loss=loss, budget_bytes=budget_bytes,
                                       device_spec=device_spec, limit_scales=scales)
        return budget_peak(memory_at[b]) if scale is None else scaled_peak(memory_at[b], scale)
    free = _free_memory()
    if not result["basis"].startswith("measured on the meta") and (free is None or budget_bytes > free // 2):
        # the step runs on real tensors here: each batch the search tried would allocate its memory on
        # this machine, and the budget (a GPU's, many times a laptop's) is more than half of what it has free
        fit = {"max_batch": None, "basis": (
            "not searched: the step cannot run on the meta device, and the batches near the budget would allocate "
            "their step on this machine: the budget is more than half the memory it has free")}
    else:  # on a GPU spec, the largest batch sure to fit given the model's measured error
        fit = max_batch(lambda b: peak_at(b, ALLOCATED_LOW if gpu else None), batch_size(args, kwargs), budget_bytes,
                        gpu)
    result["max_batch"] = fit["max_batch"]
    if gpu:
        fit["basis"] += (
            "; on a GPU spec a batch is held to the caching allocator replayed under the budget less the CUDA "
            "context, as PyTorch runs under set_per_process_memory_fraction: it fits unless a tensor's request runs "
            "out after the free cached segments are released (a cuDNN workspace that does not fit is done "
            f"without); max_batch is the largest batch that fits under {ALLOCATED_LOW} x that limit, so it fits "
            f"even where the model counts its storages {1 - ALLOCATED_LOW:.0%} short ({MARGIN_SOURCE})")
    if gpu and fit["max_batch"] is not None:  # what the measured error allows above it
        high = max_batch(lambda b: peak_at(b, ALLOCATED_HIGH), batch_size(args, kwargs), budget_bytes, True)["max_batch"]
        result["max_batch_range"] = [fit["max_batch"], max(high, fit["max_batch"]) if high is not None else None]
        fit["range_basis"] = (
            "[max_batch, the largest batch that could fit]: above the high end the step runs out under "
            f"{ALLOCATED_HIGH} x the limit, so it does not fit even where the model counts its storages "
            f"{ALLOCATED_HIGH - 1:.0%} over; between the ends, the model's error decides ({MARGIN_SOURCE})")
    result["max_batch_basis"] = fit
    findings = [] if result["fits"] else ways_to_fit(
        model, args, kwargs, optimizer=optimizer, loss=loss, budget=budget_bytes, device_spec=device_spec,
        result=result, fit=fit)
    return result, findings
