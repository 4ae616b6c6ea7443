"""Whether a training batch fits a memory budget and the largest batch that does; the ways to fit
are rule AL610's (archlint.model.checks.batch_does_not_fit), built on the functions here.

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
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from archlint.errors import UsageError
from archlint.model.train import meta_shims
from archlint.model.train.memory import MetaStepFailed, step_memory, to_meta
from archlint.model.train.values import VALUE_LIMIT_BYTES

MAX_EVALUATIONS = 16
STEP_OUT = 4  # max_batch's steps out from where the answer is expected: 1, 2, 4, 8 batches
REAL_INPUT_BYTES = 256 << 20  # with_batch: a larger input is made on meta
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
MARGIN_SOURCE = (
    "measured on an H200 (benchmarks/gpu_checks.py, 63 training steps and 17 max_batch trials): "
    f"peak_bytes {ALLOCATED_LOW}-{ALLOCATED_HIGH} x torch.cuda.max_memory_allocated"
)


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


def with_batch(args: tuple, kwargs: dict, batch: int, real_limit: int = REAL_INPUT_BYTES) -> tuple[tuple, dict]:
    """Inputs like these with the batch dimension (every tensor's leading one that equals the
    batch) set to `batch`: meta stays meta; a real tensor's rows are repeated in turn, so token
    ids stay in the vocabulary and masks keep their values when the step must run on real
    tensors (a model the meta device cannot run). An input that would take over REAL_INPUT_BYTES
    becomes meta: the meta step reads no input's data but ids and masks (kept only up to
    values.VALUE_LIMIT_BYTES anyway), and the search for max_batch reaches batches whose inputs this
    machine could not hold (an MLP on an 80 GB budget: tens of millions of rows); a step that reads a
    mask's data then cannot run on meta, and the search keeps below that batch. `real_limit`: that
    size, lower where no step will read a larger input's data (fit_report: a step that runs on meta
    reads the values of inputs up to values.VALUE_LIMIT_BYTES only)."""
    old = batch_size(args, kwargs)

    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.dim() == 0 or t.shape[0] != old:
            return t
        big = t.element_size() * (t.numel() // old) * batch > real_limit
        if t.device.type == "meta" or big:
            if t.is_contiguous():  # the real rows' layout too
                return torch.empty((batch, *t.shape[1:]), dtype=t.dtype, device="meta").requires_grad_(t.requires_grad)
            # the rows taken on meta as below on the real tensor: the same layout (a channels-last
            # image stays channels-last, as the real rows do), no data
            like = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            return like[torch.arange(batch, device="meta") % old].requires_grad_(t.requires_grad)
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
    smooth, budget = (
        math.ceil(result["peak_bytes"] / scale) + result["allocator"]["cuda_context_bytes"],
        result["budget_bytes"],
    )
    return max(smooth, budget + 1) if run["out_of_memory"] else min(smooth, budget)


def max_batch(
    peak_at: Callable[[int], int],
    batch: int,
    budget: int,
    bisect: bool = False,
    known: dict[int, int] | None = None,
    near: int | None = None,
) -> dict:
    """The largest batch whose peak is within `budget`: the line through two evaluations, then
    evaluations at the predicted batch and the next to confirm it (walking if the line was off).
    `bisect`: where a batch that fits and one that does not are known, halve between them (for a
    yes-or-no answer, such as an allocator replayed under a limit, whose bytes say little near the
    answer; while the bracket is wider than 4x, they still guide the steps).
    `known`: peaks already found (by batch), which bracket the answer at no cost; the search's own
    evaluations are counted against MAX_EVALUATIONS. `near`: where the answer is expected (fit_report:
    the high end of max_batch_range, from max_batch): evaluated first, then steps of 1, 2, 4, ...
    away from it until one lands on the other side, which brackets the answer tightly."""
    seen: dict[int, int] = dict(known or {})
    failed: dict[int, str] = {}  # batches whose step cannot run on meta (a mask too large to keep its values)
    evaluated = 0

    def peak(b: int) -> int:
        nonlocal evaluated
        if any(b >= f for f in failed):  # at or above a batch whose step cannot run on meta
            raise _Unevaluable
        if b not in seen:
            if evaluated >= MAX_EVALUATIONS:
                raise _OutOfEvaluations
            evaluated += 1
            try:
                seen[b] = peak_at(b)
            except MetaStepFailed as exc:
                failed[b] = str(exc)
                raise _Unevaluable from None
        return seen[b]

    b1, b2 = batch, 2 * batch
    try:
        slope = (peak(b2) - peak(b1)) / (b2 - b1)
    except _Unevaluable:
        return {
            "max_batch": b1 if peak(b1) <= budget else None,
            "per_sample_bytes": None,  # no line fitted: one batch measured
            "fixed_bytes": None,
            "evaluations": [list(e) for e in sorted(seen.items())],
            "basis": f"not searched above batch {b1}: {_cannot_run(b2, failed[b2])}",
        }
    fixed = peak(b1) - slope * b1
    if slope <= 0:
        return {
            "max_batch": None,
            "per_sample_bytes": slope,
            "fixed_bytes": int(fixed),
            "evaluations": sorted(seen.items()),
            "basis": "the peak does not grow with the batch",
        }
    # The line's answer, then secant steps between the largest batch known to fit (lo) and the
    # smallest known not to (hi): the peak is piecewise affine (it moves from the optimizer step
    # to the backward as activations grow), so each step lands on the next piece or the answer.
    # On a GPU the reserved peak is a staircase (segments of 2 and 20 MiB), where secant steps
    # stall at one batch each: then steps double until a batch does not fit, and where a step
    # does not halve the bracket, the next halves it.
    guess = max(1, math.floor((budget - fixed) / slope))
    unresolved = None
    before = evaluated
    try:
        _step_out(peak, budget, near)
    except _OutOfEvaluations:  # only with a MAX_EVALUATIONS below STEP_OUT + 3: the loop goes on
        pass
    evaluated = before  # at most STEP_OUT + 1 more: a `near` far off leaves the search its own count
    width, stride, stalled = math.inf, 2, False

    def bracket() -> tuple[int, int | None]:
        """(the largest batch known to fit, the smallest known not to: over the budget, or its step unable to run)"""
        return (
            max((b for b, p in seen.items() if p <= budget), default=0),
            min([b for b, p in seen.items() if p > budget] + list(failed), default=None),
        )

    while True:
        lo, hi = bracket()
        if hi is not None and hi - lo <= 1:
            break
        if hi is None:
            if stalled:
                guess, stride = max(guess, lo + stride), 2 * stride
            if guess <= lo:
                guess = 2 * lo
        elif (bisect and hi <= 4 * max(lo, 1)) or not lo < guess < hi or _spread(lo, hi) > width / 2:
            guess = _halve(lo, hi)
        width = _spread(lo, hi) if hi is not None else math.inf
        try:
            peak(guess)
        except _Unevaluable:  # the bracket's high end is now that batch: halved towards it
            continue
        except _OutOfEvaluations:
            unresolved = [lo + 1, hi - 1 if hi is not None else None]
            break
        new_lo, hi = bracket()
        stalled, lo = stalled or new_lo == lo + 1, new_lo  # once stalled, the steps keep doubling
        if hi in failed:
            guess = _halve(lo, hi)
            continue
        a, b = sorted(seen)[:2] if lo == 0 else sorted(seen)[-2:] if hi is None else (lo, hi)
        rate = (seen[b] - seen[a]) / (b - a)
        guess = max(lo + 1, a + math.floor((budget - seen[a]) / rate)) if rate > 0 else -1
    basis = "memory model: peak affine in the batch from two evaluations, confirmed at the answer and the next batch"
    high = bracket()[1]
    if high in failed:
        basis = f"memory model: the largest batch that fits below batch {high}, where {_cannot_run(high, failed[high])}"
    if unresolved:
        basis = (
            f"memory model: the largest batch evaluated that fits; batches {unresolved[0]} to "
            f"{unresolved[1] if unresolved[1] is not None else 'more'} were not evaluated "
            f"(the search stops after {MAX_EVALUATIONS} evaluations)"
            + (f"; {_cannot_run(high, failed[high])}" if high in failed else "")
        )
    return {
        "max_batch": lo,
        "per_sample_bytes": int(slope),
        "fixed_bytes": int(fixed),
        "evaluations": [list(e) for e in sorted(seen.items())],
        "basis": basis,
    }


def _cannot_run(batch: int, reason: str) -> str:
    return (
        f"the step at batch {batch} cannot run on the meta device ({reason}); a real step that large is not "
        "run on this machine"
    )


def _halve(lo: int, hi: int) -> int:
    """The middle of the bracket; on a wide one (more than 4x: a line through small batches whose peak
    is the optimizer step's, nearly flat, can point millions of batches off) its middle in log terms,
    which closes any width in a few evaluations, where halving would spend the search's budget."""
    return math.isqrt(lo * hi) if lo >= 1 and hi > 4 * lo else (lo + hi) // 2


def _spread(lo: int, hi: int) -> float:
    """The bracket's width as the halving rule reads it: in log terms (a secant step from a line
    millions of batches off that lands near the answer has closed most of it), as batches below 1."""
    return math.log(hi / lo) if lo >= 1 else hi - lo


def _step_out(peak: Callable[[int], int], budget: int, near: int | None) -> None:
    """Evaluate `near`, then batches 1, 2, 4, 8 further on (above it where it fits, below where it
    does not) until one is on the other side: the answer is then bracketed within the last step.
    Farther than that, the search goes on from what these found (a `near` far off costs
    STEP_OUT + 1 evaluations more than none, not counted against MAX_EVALUATIONS)."""
    if near is None or near < 1:
        return
    fits = peak(near) <= budget
    at, step = near, 1
    for _ in range(STEP_OUT):
        nxt = at + step if fits else at - step
        if nxt < 1 or (peak(nxt) <= budget) != fits:
            return
        at, step = nxt, 2 * step


class _OutOfEvaluations(Exception):
    """The search used its MAX_EVALUATIONS evaluations of the memory model."""


class _Unevaluable(_OutOfEvaluations):
    """A batch whose step cannot run on the meta device (memory.MetaStepFailed): the search keeps below it."""


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
            flops[key[len(root) + 1 :]] = int(sum(counts.values())) // 2
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


def _high_end_near(memory_at: dict[int, dict], low: int) -> int | None:
    """Where max_batch_range's high end is expected, from max_batch (`low`): the batch whose live
    peak is ALLOCATED_HIGH / ALLOCATED_LOW times the peak at `low` (both ends are the allocator's
    answer under the limit times a scale; the live bytes are affine in the batch, on the line
    through the smallest batch evaluated and `low`). Only where the search starts: it is confirmed."""
    first = min(memory_at)
    if low not in memory_at or low <= first:
        return None
    p0, p1 = memory_at[first]["peak_bytes"], memory_at[low]["peak_bytes"]
    slope = (p1 - p0) / (low - first)
    if slope <= 0:
        return None
    return math.floor(low + (p1 * ALLOCATED_HIGH / ALLOCATED_LOW - p1) / slope)


def _free_memory() -> int | None:
    """The bytes of memory this machine has free (Linux, macOS: sysconf), None where it cannot say."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def fit_report(
    model,
    args,
    kwargs,
    *,
    optimizer: str = "adam",
    loss: str = "mean",
    budget_bytes: int | None = None,
    device_spec=None,
) -> dict:
    """The step's memory with `fits`, `max_batch` and its basis (`max_batch_basis`). The budget is
    `budget_bytes`, else the device spec's memory. When it does not fit, the ways to fit are AL610's
    (archlint.model.checks.batch_does_not_fit)."""
    budget_source = "--memory-budget"
    if budget_bytes is None:
        memory = device_memory(device_spec)
        if memory is None:
            raise UsageError("no memory budget: give --memory-budget SIZE or a GPU --device-spec")
        budget_bytes, budget_source = memory
    gpu = getattr(device_spec, "kind", "") == "gpu"  # the allocator replayed: max_batch allows for its error
    scales = (ALLOCATED_LOW, ALLOCATED_HIGH) if gpu else ()
    result = step_memory(
        model,
        args,
        kwargs,
        optimizer=optimizer,
        loss=loss,
        budget_bytes=budget_bytes,
        device_spec=device_spec,
        limit_scales=scales,
    )
    result["budget_source"] = budget_source
    memory_at = {batch_size(args, kwargs): result}
    # a step that ran on meta at the input's batch never runs on real tensors at another: a mask too
    # large to keep its values (values.VALUE_LIMIT_BYTES) would have the search allocate a whole step
    # of a batch near the budget's on this machine (a tiny Llama given an attention mask: 6.6 GB at batch 810,703)
    on_meta = result["basis"].startswith("measured on the meta")

    # a step on meta reads no input's data above values.VALUE_LIMIT_BYTES (its values are not kept):
    # such an input is made on meta, not copied row by row (up to REAL_INPUT_BYTES an evaluation)
    real_limit = VALUE_LIMIT_BYTES if on_meta else REAL_INPUT_BYTES

    def peak_at(b: int, scale: float | None = None) -> int:
        if b not in memory_at:
            a, k = with_batch(args, kwargs, b, real_limit)
            memory_at[b] = step_memory(
                model,
                a,
                k,
                optimizer=optimizer,
                loss=loss,
                budget_bytes=budget_bytes,
                device_spec=device_spec,
                limit_scales=scales,
                real_fallback=not on_meta,
            )
        return budget_peak(memory_at[b]) if scale is None else scaled_peak(memory_at[b], scale)

    free = _free_memory()
    if not result["basis"].startswith("measured on the meta") and (free is None or budget_bytes > free // 2):
        # the step runs on real tensors here: each batch the search tried would allocate its memory on
        # this machine, and the budget (a GPU's, many times a laptop's) is more than half of what it has free
        fit = {
            "max_batch": None,
            "basis": (
                "not searched: the step cannot run on the meta device, and the batches near the budget would allocate "
                "their step on this machine: the budget is more than half the memory it has free"
            ),
        }
    else:  # on a GPU spec, the largest batch sure to fit given the model's measured error
        fit = max_batch(
            lambda b: peak_at(b, ALLOCATED_LOW if gpu else None), batch_size(args, kwargs), budget_bytes, gpu
        )
    result["max_batch"] = fit["max_batch"]
    if gpu:
        fit["basis"] += (
            "; on a GPU spec a batch is held to the caching allocator replayed under the budget less the CUDA "
            "context, as PyTorch runs under set_per_process_memory_fraction: it fits unless a tensor's request runs "
            "out after the free cached segments are released (a cuDNN workspace that does not fit is done "
            f"without); max_batch is the largest batch that fits under {ALLOCATED_LOW} x that limit, so it fits "
            f"even where the model counts its storages {1 - ALLOCATED_LOW:.0%} short ({MARGIN_SOURCE})"
        )
    if gpu and fit["max_batch"] is not None:  # what the measured error allows above it
        # every evaluation replayed the allocator under both scales: the search for the high end
        # starts from what the first one found (it evaluated them all again: half of --device-spec's cost)
        found = {b: scaled_peak(r, ALLOCATED_HIGH) for b, r in memory_at.items()}
        searched = max_batch(
            lambda b: peak_at(b, ALLOCATED_HIGH),
            batch_size(args, kwargs),
            budget_bytes,
            True,
            known=found,
            near=_high_end_near(memory_at, fit["max_batch"]),
        )
        high = searched["max_batch"]
        result["max_batch_range"] = [fit["max_batch"], max(high, fit["max_batch"]) if high is not None else None]
        fit["range_basis"] = (
            "[max_batch, the largest batch that could fit]: above the high end the step runs out under "
            f"{ALLOCATED_HIGH} x the limit, so it does not fit even where the model counts its storages "
            f"{ALLOCATED_HIGH - 1:.0%} over; between the ends, the model's error decides ({MARGIN_SOURCE})"
        )
        if "not evaluated" in searched["basis"] or "cannot run" in searched["basis"]:  # said, as max_batch's is
            fit["range_basis"] += f"; the high end: {searched['basis'].removeprefix('memory model: ')}"
    result["max_batch_basis"] = fit
    return result
