"""AL404: debugging and profiling APIs left on in a run (anomaly detection, emit_nvtx, profilers,
gradcheck)."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL404",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
_WHY = {
    "torch.autograd.set_detect_anomaly": "anomaly detection re-checks every backward op for NaNs and keeps "
    "forward stack traces",
    "torch.autograd.detect_anomaly": "anomaly detection re-checks every backward op for NaNs and keeps "
    "forward stack traces",
    "torch.autograd.profiler.emit_nvtx": "emit_nvtx adds an NVTX range around every op",
    "torch.cuda.profiler.profile": "the CUDA profiler records every kernel",
    "torch.autograd.profiler.profile": "the autograd profiler records every op",
    "torch.profiler.profile": "the profiler records every op (give it a schedule= to limit it)",
    "torch.autograd.gradcheck": "gradcheck runs the function many times in float64",
    "torch.autograd.gradgradcheck": "gradgradcheck runs the function many times in float64",
}


def _enabled(site, name: str) -> bool:
    """Only literal ways of switching it on count; `enabled=args.profile` is a choice."""
    if name == "torch.autograd.set_detect_anomaly":
        return df.literal(df.argument(site, "mode", 0)) is True
    enabled = df.argument(site, "enabled", None)
    if enabled is df.UNKNOWN or (enabled is not df.MISSING and df.literal(enabled) is not True):
        return False
    if name == "torch.profiler.profile" and df.argument(site, "schedule", None) is not df.MISSING:
        return False  # a scheduled profiler records a few steps on purpose
    return True


_GLOBAL = ("torch.autograd.set_detect_anomaly", "torch.autograd.detect_anomaly")


def check(facts: Facts):
    scripts = bool(df.batch_loops(facts))
    for site in facts.calls_to(*_WHY):
        name = facts.qname(site.node.func, site.scope)
        if name not in _GLOBAL and not scripts:
            continue  # a profiler in library code (a tool's --trace option) is its job, not a leftover
        if _enabled(site, name):
            yield Finding(
                "AL404",
                site.node,
                f"{name.rsplit('.', 1)[-1]} is a debugging API: {_WHY[name]}, slowing every step; "
                "remove it or put it behind a flag",
            )
