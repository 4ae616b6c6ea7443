"""The trace rules: one module per code, each `CODE`, `OPTIONS` (defaults, documented on its page
in rules/) and `check(analysis, options) -> list[Diagnostic]`; the cross-rank rules (`rank_modules`)
check one job's traces together: `check(report, analyses, options)` with archlint.trace.ranks's report."""

from __future__ import annotations

from types import ModuleType

from archlint.trace.checks import (
    communication_exposed,
    data_parallel,
    fp32_gemm,
    gpu_idle,
    input_bound,
    launch_bound,
    layout_conversion,
    memory_capacity,
    pageable_copy,
    step_sync,
    straggler,
    unrepresentative,
)


def modules() -> tuple[ModuleType, ...]:
    return (input_bound, pageable_copy, step_sync, fp32_gemm, launch_bound, data_parallel,
            communication_exposed, memory_capacity, layout_conversion, gpu_idle, unrepresentative)


def rank_modules() -> tuple[ModuleType, ...]:
    """The rules that read several ranks of one job together (archlint/trace/ranks.py)."""
    return (straggler,)
