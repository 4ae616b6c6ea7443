"""The distributed step of one model: record once, lay out per rank, sweep, list the collectives."""

from __future__ import annotations

import re
from collections import Counter

import torch
from torch import nn

from archlint.model.distributed.layout import VOLUME_FACTOR, Layout, lay_out, sweep
from archlint.model.distributed.result import Collective, Distributed, PerRank
from archlint.model.distributed.strategy import Parallel
from archlint.model.distributed.units import Units, shard_units
from archlint.model.train.allocator import replay
from archlint.model.train.fit import budget_peak
from archlint.model.train.memory import CUDA_CONTEXT_BYTES, StepRecording, record_step

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def trainable_predicate(pattern: str | None):
    """--trainable PATTERN: a regular expression searched in each parameter's name (None: all train)."""
    if pattern is None:
        return None
    regex = re.compile(pattern)
    return lambda name: regex.search(name) is not None


def record(
    model: nn.Module,
    args: tuple,
    kwargs: dict,
    *,
    optimizer: str,
    loss: str,
    device_spec,
    mixed_precision: str | None,
    trainable: str | None = None,
) -> StepRecording:
    """The steady step recorded once for every layout of it (its precision and frozen set fixed)."""
    return record_step(
        model,
        args,
        kwargs,
        optimizer=optimizer,
        loss=loss,
        device_spec=device_spec,
        dtype=DTYPES.get(mixed_precision) if mixed_precision else None,
        trainable=trainable_predicate(trainable),
    )


def buffers_of(model: nn.Module) -> list[tuple[int, int]]:
    return [(b.numel() * b.element_size(), b.element_size()) for b in model.buffers()]


def per_rank(
    rec: StepRecording, par: Parallel, units: Units, buffers: list[tuple[int, int]], budget_bytes: int | None = None
) -> tuple[PerRank, Layout]:
    """One rank's memory (PerRank) and the layout it came from."""
    lay = lay_out(rec, par, units.paths, buffers)
    swept = sweep(lay.stores)
    at = _where(swept.at, rec.marks)
    pr = PerRank(
        peak_bytes=swept.peak_bytes,
        params_bytes=lay.params_bytes,
        grads_bytes=lay.grads_bytes,
        optimizer_bytes=lay.optimizer_bytes,
        activations_bytes=int(rec.single["activations_bytes"]),
        comm_buffers_bytes=swept.at_peak["comm_buffers"],
        gathered_params_bytes=swept.at_peak["gathered_params"],
        buffers_bytes=int(rec.single["buffers_bytes"]),
        inputs_bytes=int(rec.single["inputs_bytes"]),
        model_states_bytes=lay.params_bytes + lay.grads_bytes + lay.optimizer_bytes,
        optimizer_counters_bytes=lay.optimizer_counters_bytes,
        padding_bytes=lay.padding_bytes,
        host_bytes=lay.host_bytes,
        at_peak=swept.at_peak,
        at=at,
    )
    shaped = {"peak_bytes": swept.peak_bytes}  # as step_memory's result, for fit.budget_peak
    if rec.gpu:
        lifetimes = [(s.born, s.died, s.nbytes) for s in lay.stores if not s.host and s.nbytes > 0]
        pr.device_peak_bytes = replay(lifetimes).peak_reserved + CUDA_CONTEXT_BYTES
        shaped["device_peak_bytes"] = pr.device_peak_bytes
        if budget_bytes is not None:  # the allocator limited to the budget less the context, as step_memory does
            under = replay(lifetimes, limit=int(budget_bytes) - CUDA_CONTEXT_BYTES)
            if not under.out_of_memory:  # what it holds under the limit: cached segments released there
                shaped["needed_bytes"] = under.peak_reserved + CUDA_CONTEXT_BYTES
    if budget_bytes is not None:
        shaped["budget_bytes"] = int(budget_bytes)
        # one meaning of "fits" (archlint.model.train.fit.budget_peak): the figure the budget is held to
        pr.budget_figure_bytes = budget_peak(shaped)
        pr.fits = pr.budget_figure_bytes <= budget_bytes
    pr.budget_bytes = int(budget_bytes) if budget_bytes is not None else None
    return pr, lay


def _where(when: float, marks: dict[str, int]) -> str:
    phase = "before the step"
    for name in ("forward", "backward", "step"):
        if name in marks and when >= marks[name] - 1:
            phase = name
    return phase


def collectives(lay: Layout) -> tuple[list[Collective], int]:
    """The step's collectives grouped by (op, phase, payload, group, what) in the order issued, and
    the volume per rank in the ZeRO paper's terms (an all-reduce moves its buffer twice)."""
    counts: Counter = Counter()
    first: dict = {}
    for i, c in enumerate(sorted(lay.issued, key=lambda c: c.ready)):
        what = re.sub(
            r"^unit .*?( \(prefetched\)| shard over replicas)?$", lambda m: "unit" + (m.group(1) or ""), c.what
        )
        key = (c.op, c.phase, int(c.nbytes), c.group, what)
        counts[key] += 1
        first.setdefault(key, i)
    out = [
        Collective(op, phase, counts[k], nbytes, group, what)
        for k in sorted(counts, key=first.get)
        for op, phase, nbytes, group, what in [k]
    ]
    volume = sum(c.count * c.bytes_per_rank * VOLUME_FACTOR[c.op] for c in out)
    return out, volume


COMM_BASIS = (
    "bytes_per_rank: each collective's unsharded buffer (an all-gather's output, a reduce-scatter's "
    "input, an all-reduce's buffer); comm_bytes_per_rank: their sum with an all-reduce counted twice "
    "(reduce-scatter + all-gather), the ZeRO paper's volume (DDP 2Ψ, ZeRO-3 3Ψ)"
)


def distributed_step(
    model: nn.Module,
    args: tuple,
    kwargs: dict,
    par: Parallel,
    *,
    optimizer: str,
    loss: str,
    device_spec=None,
    budget_bytes: int | None = None,
    trainable: str | None = None,
    recording: StepRecording | None = None,
) -> tuple[Distributed, StepRecording, Units]:
    """The per-rank step of `model` under `par` (module docstring of archlint.model.distributed)."""
    rec = recording or record(
        model,
        args,
        kwargs,
        optimizer=optimizer,
        loss=loss,
        device_spec=device_spec,
        mixed_precision=par.mixed_precision,
        trainable=trainable,
    )
    if not rec.gpu and par.backend != "gloo":  # a CPU target trains over gloo
        par = par.with_(backend="gloo")
    units = shard_units(model, par.shard_unit)
    pr, lay = per_rank(rec, par, units, buffers_of(model), budget_bytes)
    found, volume = collectives(lay)
    gathers = par.strategy in ("fsdp", "hsdp", "zero3")
    notes = list(lay.notes)
    if par.mixed_precision:
        notes.append(
            f"mixed precision {par.mixed_precision}: the step recorded with {par.mixed_precision} weights, "
            "gradients and activations; fp32 optimizer state and master weights"
            + (
                " (the sharded fp32 parameters, FSDP2 MixedPrecisionPolicy(param_dtype, reduce_dtype=fp32))"
                if par.strategy in ("fsdp", "hsdp")
                else f" (ZeRO's fp32 copy; gradients reduced in {par.mixed_precision})"
            )
        )
    if par.strategy in ("zero1", "zero2", "zero3"):
        notes.append(
            f"{par.strategy}: laid out as the ZeRO paper and DeepSpeed do it (flat partitions of 1/N; "
            "gradients reduce-scattered in buckets of bucket_cap_mb)"
        )
    basis = (
        "the memory model's steady step (meta device) laid out per rank as the strategy keeps and frees its "
        "storages, swept for the live peak"
        + (
            "; on a GPU spec replayed through the caching allocator, plus the CUDA context (device_peak_bytes)"
            if rec.gpu
            else ""
        )
    )
    return (
        Distributed(
            strategy=par.strategy,
            world_size=par.world_size,
            nodes=par.nodes,
            mixed_precision=par.mixed_precision,
            cpu_offload=par.cpu_offload,
            shard_unit=units.class_name if gathers else None,
            shard_unit_basis=units.basis if gathers else "",
            per_rank=pr,
            collectives=found,
            comm_bytes_per_rank=volume,
            comm_basis=COMM_BASIS,
            buckets_bytes=lay.buckets,
            notes=notes,
            basis=basis,
        ),
        rec,
        units,
    )


def budget_figure(pr: PerRank) -> int:
    """What a budget is held to (fit.budget_peak's figure), else the device peak on a GPU spec, else the live peak."""
    if pr.budget_figure_bytes is not None:
        return pr.budget_figure_bytes
    return pr.device_peak_bytes if pr.device_peak_bytes is not None else pr.peak_bytes
