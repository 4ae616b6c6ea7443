"""Judge the forward the user runs: findings that may come from code only reachable while the
model is exported or traced are checked again on the eager path before they are reported.

Libraries branch on being traced: transformers builds an attention mask only when
`is_torchdynamo_exporting()` is true and eagerly passes `is_causal=True` and builds none. A rule
whose finding is such a built-in-forward artifact (its module declares EAGER_RECHECK = True)
is re-run on the dispatch capture — one real forward, recorded op by op, no tracing — and a
warning it does not find there at the same place becomes info, saying why.
"""

from __future__ import annotations

import dataclasses

from archlint.diagnostics import Diagnostic, Severity

EAGER = "dispatch"


def recheck_codes(modules) -> set[str]:
    return {m.CODE for m in modules if getattr(m, "EAGER_RECHECK", False)}


def suspects(found: list[Diagnostic], codes: set[str], strategy: str) -> list[Diagnostic]:
    """The warnings to check again: those of the declared rules on a traced capture."""
    if strategy == EAGER:
        return []
    return [d for d in found if d.code in codes and d.severity is Severity.WARNING]


def recheck(found: list[Diagnostic], eager: list[Diagnostic], strategy: str) -> None:
    """Each suspect not found on the eager capture at the same module becomes info."""
    seen = {(d.code, d.module or "") for d in eager}
    for d in found:
        if (d.code, d.module or "") in seen:
            d.evidence["eager"] = "confirmed on the eager forward (dispatch capture)"
            continue
        d.severity = Severity.INFO
        d.evidence["eager"] = "absent"
        d.evidence["verdict"] = (
            f"only in the {strategy} capture: the eager forward (dispatch capture) does not build it, "
            "so the model as the user runs it does not pay this"
        )
        d.message += (
            f" (only under {strategy}: the eager forward does not do this — a library branch taken while "
            "exporting or tracing; info)"
        )


def eager_settings(settings, codes: set[str]):
    """The run's settings for the eager re-check: dispatch capture, only the rules to re-check."""
    return dataclasses.replace(settings, strategy=EAGER, select=sorted(codes), extend_select=[], latency=False)
