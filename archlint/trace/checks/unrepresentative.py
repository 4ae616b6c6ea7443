"""AL510: the trace is not (all) steady-state training steps: start-up, warm-up, the run's first
step, no ProfilerStep ranges or with_stack overhead; what is left out of the prices, and how to
record a trace that prices the loop."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms

CODE = "AL510"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()  # says what is left out of the prices and how to re-record; prices nothing itself
FIX = "none"
OPTIONS = {"max_unsteady_share": 0.5}  # unsteady share of the traced time above which it is a warning


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    if t.cpu_only or not t.per_step or not t.rerecord:
        return []
    total = sum(s.wall_us for s in t.per_step)
    unsteady = [s for s in t.per_step if not s.steady]
    left_out = sum(s.wall_us for s in unsteady)
    steady = t.windows
    parts = []
    if unsteady:
        parts.append(
            f"{ms(left_out)} of {ms(total)} traced is not steady state and is not priced ("
            + "; ".join(sorted({s.unsteady_reason or "" for s in unsteady}))
            + ")"
        )
    if not t.steps:
        parts.append("the trace has no ProfilerStep ranges, so its figures are per traced span, not per step")
    if t.evidence is not None and t.evidence.with_stack:
        parts.append("with_stack=True inflates host time, so host-side idle is overstated")
    if not steady:
        parts.append("no steady-state window is left: nothing is priced")
    share = left_out / total if total else 0.0
    severity = Severity.WARNING if not steady or share > options["max_unsteady_share"] else Severity.INFO
    return [
        finding(
            t,
            CODE,
            "this trace is not representative of the training loop: " + "; ".join(parts) + f" — to fix: {t.rerecord}",
            saving_us=None,
            alternative=t.rerecord,
            evidence={
                "unsteady_us": round(left_out, 3),
                "traced_us": round(total, 3),
                "steady_windows": len(steady),
                "warnings": t.warnings,
                "rerecord": t.rerecord,
            },
            severity=severity,
        )
    ]
