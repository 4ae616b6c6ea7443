"""Findings whose fix is one of the what-if transformations take its measured result as their
price (basis "measured"): the saving is the whole model's, end to end, with the fix applied by
archlint to a copy. Which rule each transformation fixes is the rule's own declaration: a model
rule's FIXED_BY (and JUDGED_BY_WHAT_IF), a code rule's PRICED_BY_WHAT_IF (AL403: autocast). Code
findings take the what-if of the model analyzed in the same run, labelled "estimated" (`link_code`)."""

from __future__ import annotations

import ast
from pathlib import Path

from archlint.code.checks import modules as code_modules
from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model.checks import RuleDeclarationError, check_modules
from archlint.result import ModelResult, WhatIf
from archlint.units import times
from archlint.whatif_names import NAMES


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


def code_fixes(modules=None) -> dict[str, tuple[str, ...]]:
    """Code rule → the what-ifs that price it (its module's PRICED_BY_WHAT_IF, any of them, in
    order), each name checked against the --what-if transformations."""
    fixes = {}
    for m in code_modules() if modules is None else modules:
        names = tuple(getattr(m, "PRICED_BY_WHAT_IF", ()))
        unknown = [n for n in names if n not in NAMES]
        if unknown:
            raise RuleDeclarationError(f"{m.__name__} declares PRICED_BY_WHAT_IF {unknown[0]!r}, not a --what-if "
                                       f"transformation ({', '.join(NAMES)})")
        fixes.update({code: names for code in m.CODES if names})
    return fixes


def link_code(diagnostics: list[Diagnostic], models: list[ModelResult]) -> None:
    """Price each finding of a code rule declaring PRICED_BY_WHAT_IF (AL403: autocast) with the
    analyzed model's what-if (bf16/fp16, or the device-spec estimate), of the model its file
    trains: the only model analyzed, else the one model defined in the finding's file or in a module it imports.
    As for model findings, one model's saving prices one finding: with several findings on the
    same model, none is priced. With a GPU device spec, the spec's 16-bit estimate is the basis
    (the measured figure is quoted beside it); without, a what-if that is not faster beyond the
    noise never prices: the finding says the measurement found no speed-up."""
    models = [m for m in models if m.what_if and m.phase is None]  # a --decode step is not a training step
    for code, names in code_fixes().items():
        found: dict[int, list[Diagnostic]] = {}
        for d in diagnostics:
            if d.code == code and d.file:
                m = _model_of(d.file, models)
                if m is not None:
                    found.setdefault(id(m), []).append(d)
        for m in models:
            linked = found.get(id(m), [])
            w = next((w for name in names for w in m.what_if if w.name == name and w.applicable and w.speedup), None)
            if w is None or not linked:
                continue
            measured = f"{w.name} autocast measured {times(w.speedup)} on the forward of {m.target} on {m.device}"
            estimate = (m.estimate or {}).get("autocast")
            if estimate is None and w.verdict != "faster":
                state = w.verdict or "no spread measured"
                for d in linked:
                    d.message += f" (--what-if {w.name} measured no speed-up on the forward of {m.target} on {m.device}: " \
                                 f"{times(w.speedup)}, {state})"
                    d.evidence["what_if"] = _evidence(w, m)
                continue
            if len(linked) != 1:
                continue
            d = linked[0]
            d.evidence["what_if"] = _evidence(w, m)
            if estimate is not None:
                d.price = _estimated_price(m, estimate, measured)
            else:
                d.price = Price.timed(
                    f"{measured}; the training step on CUDA may differ",
                    saving_ms=w.baseline_ms * (1 - 1 / w.speedup), model_ms=w.baseline_ms, basis="estimated",
                    device=m.device,  # where the what-if was measured
                )


def _estimated_price(m: ModelResult, estimate: dict, measured: str) -> Price:
    """The device-spec estimate of the forward in 16 bits against float32."""
    fp32, half, spec = m.estimate["latency_ms"], estimate["latency_ms"], m.estimate["device_spec"]
    return Price.timed(
        f"{estimate['dtype']} autocast estimated {fp32 / half:.2f}× on the forward of {m.target} on {spec} "
        f"({fp32:.3g} ms in float32, {half:.3g} ms with {estimate['assumption']}); {measured}; the training step may differ",
        saving_ms=fp32 - half, model_ms=fp32, basis="estimated", device=spec,
    )


def _evidence(w: WhatIf, m: ModelResult) -> dict:
    return {"name": w.name, "model": m.target, "device": m.device, "pass": "forward (inference)",
            "speedup": w.speedup, "spread": w.spread}


def _model_of(file: str, models: list[ModelResult]) -> ModelResult | None:
    if len(models) == 1:
        return models[0]
    mine = [m for m in models if _trains(file, m.target)]
    return mine[0] if len(mine) == 1 else None


def _trains(file: str, target: str) -> bool:
    """The code file is the model's file or imports its module (by the module's name: `import
    model`, `from model import Net`, `from .model import Net`, `from pkg import model`). Read with
    ast, never run."""
    path, sep, _ = target.rpartition(":")
    if not sep or not path.endswith(".py"):
        return False  # hf:NAME and the like: no file to match
    model_file, code_file = Path(path).resolve(), Path(file).resolve()
    if model_file == code_file:
        return True
    try:
        tree = ast.parse(code_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    stem = model_file.stem
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[-1] == stem for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[-1] == stem or any(a.name == stem for a in node.names):
                return True
    return False
