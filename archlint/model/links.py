"""Model findings whose fix is one of the what-if transformations take its measured result as their
price (basis "measured"): the saving is the whole model's, end to end, with the fix applied by
archlint to a copy. Which rule each transformation fixes is the rule's own declaration (FIXED_BY,
JUDGED_BY_WHAT_IF). And the code's distributed settings checked against the model analyzed in the
same run (`link_distributed`). A code rule priced by the model (AL403) prices itself in its own
file (archlint.code.checks.autocast): the model analyzer never imports the code linter."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.checks import check_modules
from archlint.model_of import model_of
from archlint.result import ModelResult, WhatIf
from archlint.units import human_bytes


def link(diagnostics: list[Diagnostic], what_ifs: list[WhatIf], device: str) -> None:
    """Reprice the finding of each rule declaring FIXED_BY whose transformation was applied and
    timed. The saving is the whole model's, so it prices a rule's finding only when the rule has
    one (AL205 groups its pairs into one): several findings would each claim the same saving."""
    timed = {w.name: w for w in what_ifs if w.applicable and w.speedup and w.baseline_ms}
    for rule in (m for m in check_modules() if getattr(m, "FIXED_BY", None)):
        code, name = rule.CODE, rule.FIXED_BY
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
        if getattr(rule, "JUDGED_BY_WHAT_IF", False):
            d.severity = Severity.WARNING if d.price.pays else Severity.INFO


def link_distributed(diagnostics: list[Diagnostic], models: list[ModelResult], settings) -> None:
    """The distributed-settings code findings checked against the model their file trains, analyzed
    in the same run (the model as archlint.model_of finds it):

    - AL410 (find_unused_parameters=True): the model's AL201 says whether its forward leaves a
      parameter unused. None unused in the train-mode forward (--train) makes the finding a warning
      (the flag only costs its walk); in the eval-mode forward it is said, the finding stays info;
      an unused one says the flag is needed; a forward AL201 could not check says so. Only when
      AL201 ran on the whole model (selected, no module-ignores).
    - AL415 (gradient_as_bucket_view): with --train, the bytes the flag saves (the model's gradients)."""
    for d in diagnostics:
        if d.code not in ("AL410", "AL415") or not d.file:
            continue
        m = model_of(d.file, [m for m in models if m.phase in (None, "train")])
        if m is None:
            continue
        if d.code == "AL415":
            grads = m.memory.grads_bytes if m.memory is not None else None
            if grads:
                d.message += f" ({human_bytes(grads)} per GPU on {m.target}: its gradients in the --train step)"
                d.evidence.update(model=m.target, grads_bytes=grads)
            continue
        if not settings.enabled("AL201") or settings.module_ignores.get("AL201"):
            continue
        unused = [
            u for u in diagnostics if u.code == "AL201" and u.target == m.target and not u.evidence.get("train_only")
        ]
        unchecked = any(note.startswith("AL201 not checked") for note in m.notes)
        d.evidence.update(model=m.target, mode=m.mode, unused=[u.module or u.evidence.get("parameter") for u in unused])
        if unchecked:
            d.message += (
                f" ({m.target}'s forward reads tensor values in Python, so archlint cannot tell whether "
                "some parameters go unused)"
            )
        elif unused:
            names = ", ".join(str(n) for n in d.evidence["unused"][:3]) + (" …" if len(unused) > 3 else "")
            d.message += f" (needed here: {m.target}'s {m.mode}-mode forward leaves {names} unused, AL201)"
        elif m.mode == "train":
            d.message += (
                f" ({m.target}'s train-mode forward reads every parameter, AL201 found none unused: "
                "the flag only costs its walk on every step)"
            )
            d.severity = Severity.WARNING
        else:  # eval mode: the training forward may differ (auxiliary heads, layers dropped in training)
            d.message += (
                f" ({m.target}'s eval-mode forward reads every parameter; analyze it with --train to check "
                "the training forward)"
            )
