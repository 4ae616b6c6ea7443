"""What a trace's advice is chosen by, and what each fix returns given that evidence.

`gather` reads the trace for what decides the advice: code already compiled (Triton kernels,
compiled regions, CUDA-graph replays), cuDNN's layout conversions, the collectives by name with
their calls per step and message sizes, the Python tracer's overhead, a DataLoader with workers.
`returns` turns the evidence into the waterfall's per-bucket returns where it says more than the
defaults (archlint.trace.waterfall.RETURNS): the device's precision path, pinned-copy bandwidth,
compiled code, DataParallel, with_stack. Pure functions; no torch.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from archlint.trace import waterfall
from archlint.trace import windows as windows_mod
from archlint.trace.read import Range, TraceData
from archlint.trace.records import Collective, TraceEvidence

_TRITON = re.compile(r"^triton_|^triton__|_triton_", re.I)
_COMPILED_HOST = re.compile(r"CompiledFunction|Torch-Compiled Region|CompiledAutograd|compiled_autograd|_dynamo", re.I)
LAYOUT = re.compile(r"nchwToNhwc|nhwcToNchw", re.I)  # cuDNN's layout conversions


def by_name_us(data: TraceData) -> dict[int, float]:
    """GPU time by name index."""
    out: dict[int, float] = defaultdict(float)
    for n, d in zip(data.gpu_name, data.gpu_dur):
        out[n] += d
    return out


def gather(data: TraceData, steps: list[tuple[int, Range]]) -> TraceEvidence:
    """What the advice is chosen by: whether the code is already compiled (Triton kernels, compiled
    autograd frames, graph replays), the layout-conversion kernels' share of GPU time, and the
    collectives by name with their calls per step and median message size."""
    by_name = by_name_us(data)
    total = sum(by_name.values()) or 1.0
    triton = sum(us for n, us in by_name.items() if _TRITON.search(data.names[n]))
    layout = sum(us for n, us in by_name.items() if LAYOUT.search(data.names[n]) and not _TRITON.search(data.names[n]))
    compiled_host = sum(1 for r in data.annotations if _COMPILED_HOST.search(r.name))
    windows = max(1, len(steps)) if steps else 1
    by_name: dict[str, list[int | None]] = defaultdict(list)
    for r, nbytes in data.collectives:
        by_name[r.name].append(nbytes)
    collectives = []
    for name, sizes in sorted(by_name.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        known = sorted(b for b in sizes if b)
        collectives.append(
            Collective(
                name=name,
                calls_per_step=round(len(sizes) / windows, 3),
                median_bytes=known[len(known) // 2] if known else None,
            )
        )
    return TraceEvidence(
        compiled=bool(triton or compiled_host or data.graph_launches),
        triton_share=round(triton / total, 4),
        compiled_host_ranges=compiled_host,
        graph_launches=data.graph_launches,
        layout_share=round(layout / total, 4),
        collectives=collectives,
        with_stack=windows_mod.stacks_recorded(data),
        # the DataLoader's iterator says whether it has workers (_MultiProcessingDataLoaderIter) or not
        loader_workers=any("MultiProcessing" in r.name for r in data.dataloader),
    )


# PCIe bandwidth a pinned host-to-device copy reaches, by GPU generation (GB/s, practical, not peak):
# PCIe 5 (H100/H200/B200), PCIe 4 (A100, A10, L4, Ada, MI2xx/MI3xx), PCIe 3 (V100, T4, P100).
_PINNED_GBPS = (
    (re.compile(r"H100|H200|H20|GH200|B200|B100|GB200|RTX 50", re.I), 50.0),
    (re.compile(r"A100|A10|A30|A40|L4|L40|RTX 30|RTX 40|RTX A|MI2|MI3|AMD|Radeon", re.I), 24.0),
    (re.compile(""), 12.0),
)


def pinned_gbps(data_or_device: str | None) -> float:
    name = data_or_device or ""
    return next(gbps for pattern, gbps in _PINNED_GBPS if pattern.search(name))


def returns(t: Any) -> dict[str, tuple]:
    """`t`: the trace's TraceAnalysis (archlint.trace.analyze, which calls this: not imported back).
    The waterfall's returns where the evidence says more than the defaults: the device's
    precision path, pinned-copy bandwidth, code already compiled, DataParallel's idle."""
    out: dict[str, tuple] = {}
    major = (
        int(t.compute_capability.split(".")[0])
        if t.compute_capability and t.compute_capability.split(".")[0].isdigit()
        else 0
    )
    if t.vendor == "amd" and major >= 9:
        out["fp32_gemm"] = (
            "AL504",
            "bf16 autocast (matrix cores)",
            0.5,
            "MI200/MI300 matrix cores run bf16 GEMMs several times faster than fp32 (MI250: 383 vs 47.9 "
            "TFLOPS peak); half the time is assumed back",
        )
    elif t.vendor != "amd" and major == 7:
        out["fp32_gemm"] = (
            "AL504",
            "fp16 autocast + GradScaler",
            0.5,
            "Volta/Turing tensor cores run fp16 only (no bf16, no TF32): V100 125 fp16 vs 15.7 fp32 "
            "TFLOPS peak; half the time is assumed back",
        )
    elif major < (9 if t.vendor == "amd" else 7):
        out["fp32_gemm"] = (None, None, 0.0, "no tensor cores on this device: fp32 GEMMs are its fastest path")
    p = t.pageable_h2d
    if p.bytes and p.sized_gpu_us:
        measured = p.bytes / p.sized_gpu_us / 1e3  # GB/s
        pinned = p.pinned_gbps or pinned_gbps(t.device)
        share = max(0.0, 1.0 - measured / pinned)
        source = "measured on this trace's pinned copies" if p.pinned_gbps else f"PCIe of {t.device or 'the device'}"
        out["pageable_copy"] = (
            "AL502",
            "pinned memory + non_blocking copies",
            share,
            f"pageable copies ran at {measured:.3g} GB/s; pinned ones reach about {pinned:.3g} GB/s "
            f"({source}): the copy time shrinks by {share:.0%}",
        )
    ev = t.evidence
    if ev is not None and ev.loader_workers:
        out["idle_input"] = (
            "AL501",
            "more or faster DataLoader workers",
            0.5,
            "the loader has workers already: more of them (or a cheaper __getitem__) hide part of the "
            "wait; the hand-over from the workers stays; half assumed back",
        )
    if ev is not None and ev.compiled:
        out["idle_launch"] = (
            "AL505",
            "larger graphs (fewer graph breaks, mode='reduce-overhead')",
            0.3,
            "the code is already compiled or graphed: only the gaps between graphs remain; 30% assumed back",
        )
    if len(t.data_parallel.devices) >= 2 and t.data_parallel.replication_ops:
        out["idle_host"] = (
            "AL506",
            "DistributedDataParallel, one process per GPU",
            0.5,
            "DataParallel's scatter/replicate/gather run under one GIL; DDP removes them: half assumed back",
        )
    if t.cpu_only:  # no GPU to idle: the host's other work is the step's compute (AL509 does not fire)
        out["idle_host"] = (
            None,
            None,
            0.0,
            "a CPU-only job: the host's work is the step's compute, not idle; not priced",
        )
    if ev is not None and ev.with_stack and not t.cpu_only:
        # the Python tracer about doubles host time: half the host-side idle is the profiler's own
        for name in ("idle_launch", "idle_host"):
            finding, fix, share, basis = out.get(name, waterfall.RETURNS[name])
            out[name] = (
                finding,
                fix,
                share / 2,
                basis + "; halved: with_stack=True about doubles host time, so half of this idle is the profiler's",
            )
    return out
