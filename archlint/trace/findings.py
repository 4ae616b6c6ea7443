"""Building a trace finding: one Diagnostic, priced as a measured share of step time."""

from __future__ import annotations

from typing import Any

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.units import significant


def per_step(t: TraceAnalysis, figure) -> float:
    """The mean over the complete steps (or the one whole-trace window) of figure(step), in µs."""
    windows = t.windows
    return sum(figure(s) for s in windows) / len(windows) if windows else 0.0


def finding(
    t: TraceAnalysis, code: str, message: str, *, saving_us: float, alternative: str,
    evidence: dict[str, Any] | None = None, where: str | None = None, severity: Severity = Severity.WARNING,
) -> Diagnostic:
    """A finding about trace t: the saving is µs per step; `where` names the host event kind whose
    user frame (from the trace's stacks) locates the finding in the user's code."""
    step_us = t.mean_step_us()
    price = Price.timed(
        alternative, saving_ms=saving_us / 1000, model_ms=step_us / 1000, basis="measured", device=t.device or None,
    )
    price.whole = "step time" if t.steps else "the traced GPU span"  # no ProfilerStep: the one window
    location = t.locations.get(where) if where else None
    return Diagnostic(
        code=code,
        message=message,
        severity=severity,
        file=location[0] if location else None,
        line=location[1] if location else None,
        target=t.file,
        node=f"rank {t.rank}" if t.rank is not None else "trace",
        module=None,
        evidence={"step_us": round(step_us, 3), "steps": len(t.windows), **(evidence or {})},
        price=price,
    )


def ms(us: float) -> str:
    return f"{significant(us / 1000)} ms"


def share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "n/a"
