"""Building a trace finding: one Diagnostic, priced as a share of steady-state step time.

A finding's saving is what its fix can realistically return: its buckets' returns in the trace's
waterfall (archlint.trace.waterfall), each microsecond claimed by one finding only, so the savings
add up to at most the step. The bucket itself is measured; the share of it a fix returns is an
estimate with a stated basis, so the price's basis is "estimated" and the evidence carries both.
"""

from __future__ import annotations

from typing import Any

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.printable import printable
from archlint.trace.analyze import TraceAnalysis
from archlint.units import significant


def per_step(t: TraceAnalysis, figure) -> float:
    """The mean over the complete steady steps (or the steady whole-trace window) of figure(step), in µs."""
    windows = t.windows
    return sum(figure(s) for s in windows) / len(windows) if windows else 0.0


def bucket_us(t: TraceAnalysis, name: str) -> float:
    """A waterfall bucket's mean µs per steady step (0 when nothing is steady)."""
    b = t.waterfall.bucket(name) if t.waterfall else None
    return b.us if b else 0.0


def claimed(t: TraceAnalysis, code: str) -> tuple[float, dict[str, Any]]:
    """What finding `code` claims per step (its buckets' returns) and the evidence of how."""
    if not t.waterfall:
        return 0.0, {}
    mine = [b for b in t.waterfall.buckets if b.finding == code and b.us > 0]
    return t.waterfall.returns(code), {
        "buckets": {
            b.name: {"us": round(b.us, 3), "returns_us": round(b.returns_us, 3), "basis": b.basis} for b in mine
        },
    }


def finding(
    t: TraceAnalysis,
    code: str,
    message: str,
    *,
    saving_us: float | None,
    alternative: str,
    evidence: dict[str, Any] | None = None,
    where: str | None = None,
    severity: Severity = Severity.WARNING,
    basis: str = "estimated",
    whole_us: float | None = None,
    whole: str | None = None,
) -> Diagnostic:
    """A finding about trace t: the saving is µs per steady step (or, with `whole_us`/`whole`, of
    another whole, such as the trace's GPU time for a one-time cost); None: not priced. `where`
    names the host event kind whose user frame (from the trace's stacks) locates the finding."""
    step_us = t.mean_step_us()
    price = None
    if saving_us is not None:
        price = Price.timed(
            alternative,
            saving_ms=saving_us / 1000,
            model_ms=(whole_us if whole_us is not None else step_us) / 1000,
            # the device name as the trace wrote it may hold control characters: shown in every price text
            basis=basis,
            device=printable(t.device) if t.device else None,
        )
        price.whole = whole or ("step time" if t.steps else "the traced GPU span")  # no ProfilerStep: the one window
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
