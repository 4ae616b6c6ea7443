"""Findings whose fix is one of the what-if transformations take its measured result as their
price (basis "measured"): the saving is the whole model's, end to end, with the fix applied by
archlint to a copy. No torch in here."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.result import WhatIf

# rule code → the transformation that is its fix
FIXED_BY = {"AL205": "fold-bn", "AL106": "sdpa", "AL114": "channels-last"}
# Rules whose only time basis may be the what-if (no static saving): their severity follows it,
# a warning when the measured saving is positive, else info.
JUDGED_BY_WHAT_IF = ("AL114",)


def link(diagnostics: list[Diagnostic], what_ifs: list[WhatIf], device: str) -> None:
    """Reprice the finding of each FIXED_BY rule whose transformation was applied and timed. The
    saving is the whole model's, so it prices a rule's finding only when the rule has one (AL205
    groups its pairs into one): several findings would each claim the same saving."""
    timed = {w.name: w for w in what_ifs if w.applicable and w.speedup and w.baseline_ms}
    for code, name in FIXED_BY.items():
        found = [d for d in diagnostics if d.code == code]
        w = timed.get(name)
        if w is None or len(found) != 1:
            continue
        d = found[0]
        old = d.price
        d.price = Price.timed(
            f"{old.alternative if old else w.name}, measured on the whole model with --what-if {w.name}",
            saving_ms=w.baseline_ms * (1 - 1 / w.speedup),  # the saving the reported speed-up means
            model_ms=w.baseline_ms,
            mac_bytes_saved=old.mac_bytes_saved if old else None,
            flops_saved=old.flops_saved if old else None,
            device=device,
            claims=old.claims if old else (),
        )
        d.evidence["what_if"] = {"name": w.name, "speedup": w.speedup, "spread": w.spread}
        if code in JUDGED_BY_WHAT_IF:
            d.severity = Severity.WARNING if d.price.pays else Severity.INFO
