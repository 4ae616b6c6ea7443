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
from archlint.units import human_bytes, significant, times
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
    noise never prices: the finding says the measurement found no speed-up. A --train model is
    priced on its training step, forward and backward (`_step_price`): the spec's estimate of the
    step under autocast, else the what-if's forward speed-up applied to the measured step's
    forward and backward; a what-if is then not needed where the step's estimate is there."""
    # a --decode step is not a training step; a --train model is one
    models = [m for m in models if m.phase in (None, "train") and (m.what_if or _step_autocast(m))]
    for code, names in code_fixes().items():
        found: dict[int, list[Diagnostic]] = {}
        for d in diagnostics:
            if d.code == code and d.file:
                m = _model_of(d.file, models)
                if m is not None:
                    found.setdefault(id(m), []).append(d)
        for m in models:
            linked = found.get(id(m), [])
            w = next((w for name in names for w in m.what_if or () if w.name == name and w.applicable and w.speedup), None)
            if not linked:
                continue
            if m.phase == "train":
                if len(linked) == 1:
                    _step_price(linked[0], m, w)
                continue
            if w is None:
                continue
            measured = f"{w.name} autocast measured {times(w.speedup)} on the forward of {m.target} on {m.device}"
            estimate = m.estimate.autocast if m.estimate is not None else None
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
    fp32, half, spec = m.estimate.latency_ms, estimate["latency_ms"], m.estimate.device_spec
    return Price.timed(
        f"{estimate['dtype']} autocast estimated {fp32 / half:.2f}× on the forward of {m.target} on {spec} "
        f"({significant(fp32)} ms in float32, {significant(half)} ms with {estimate['assumption']}); {measured}; the training step may differ",
        saving_ms=fp32 - half, model_ms=fp32, basis="estimated", device=spec,
    )


def _step_autocast(m: ModelResult) -> dict | None:
    return ((m.estimate.train if m.estimate is not None else None) or {}).get("autocast")


def _step_price(d: Diagnostic, m: ModelResult, w: WhatIf | None) -> None:
    """AL403 on a --train model: the step's saving (forward and backward; the optimizer keeps
    float32), a share of the step. Estimated on the spec (the step's autocast estimate), else from
    the what-if's measured forward speed-up applied to the measured step's forward and backward
    (--latency), else the forward's saving as for an inference model, said so."""
    estimate, measured = _step_autocast(m), m.totals.train.measured if m.totals.train is not None else None
    measured_text = f"; {w.name} autocast measured {times(w.speedup)} on the forward on {m.device}" if w else ""
    if w is not None:
        d.evidence["what_if"] = _evidence(w, m)
    if estimate is not None:
        fp32, spec = m.estimate.train, m.estimate.device_spec
        d.price = Price.timed(
            f"{estimate['dtype']} autocast estimated {fp32['step_ms'] / estimate['step_ms']:.2f}× on the training step "
            f"of {m.target} on {spec} ({significant(fp32['step_ms'])} ms in float32, forward {significant(fp32['forward_ms'])} + backward "
            f"{significant(fp32['backward_ms'])}; {significant(estimate['step_ms'])} ms with {estimate['assumption']}){measured_text}",
            saving_ms=fp32["step_ms"] - estimate["step_ms"], model_ms=fp32["step_ms"], basis="estimated", device=spec,
        )
        d.price.whole = "the training step's estimated time"
        d.evidence["priced_on"] = "training step: forward and backward under autocast (device-spec estimate)"
    elif w is not None and measured and w.verdict == "faster":
        both = measured["forward_ms"] + measured["backward_ms"]
        d.price = Price.timed(
            f"{w.name} autocast: the forward's measured {times(w.speedup)} applied to the measured step's forward and "
            f"backward ({significant(both)} of {significant(measured['step_ms'])} ms on {m.device}; the backward assumed to speed up as "
            "the forward does)",
            saving_ms=both * (1 - 1 / w.speedup), model_ms=measured["step_ms"], basis="estimated", device=m.device,
        )
        d.price.whole = "the training step's measured time"
        d.evidence["priced_on"] = "training step: forward and backward, from the forward's measured speed-up"
    elif w is not None and w.verdict == "faster":
        d.price = Price.timed(
            f"{w.name} autocast measured {times(w.speedup)} on the forward of {m.target} on {m.device}; the backward "
            "was not timed (--latency times the step)",
            saving_ms=w.baseline_ms * (1 - 1 / w.speedup), model_ms=w.baseline_ms, basis="estimated", device=m.device,
        )
        d.evidence["priced_on"] = "forward only: give --latency or a GPU --device-spec to price the training step"
    elif w is not None:
        d.message += (f" (--what-if {w.name} measured no speed-up on the forward of {m.target} on {m.device}: "
                      f"{times(w.speedup)}, {w.verdict or 'no spread measured'})")


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


def link_distributed(diagnostics: list[Diagnostic], models: list[ModelResult], settings) -> None:
    """The distributed-settings code findings checked against the model their file trains, analyzed
    in the same run (the model as `link_code` finds it):

    - AL410 (find_unused_parameters=True): the model's AL201 says whether its forward leaves a
      parameter unused. None unused in the train-mode forward (--train) makes the finding a warning
      (the flag only costs its walk); in the eval-mode forward it is said, the finding stays info;
      an unused one says the flag is needed; a forward AL201 could not check says so. Only when
      AL201 ran on the whole model (selected, no module-ignores).
    - AL415 (gradient_as_bucket_view): with --train, the bytes the flag saves (the model's gradients)."""
    for d in diagnostics:
        if d.code not in ("AL410", "AL415") or not d.file:
            continue
        m = _model_of(d.file, [m for m in models if m.phase in (None, "train")])
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
        unused = [u for u in diagnostics if u.code == "AL201" and u.target == m.target
                  and not u.evidence.get("train_only")]
        unchecked = any(note.startswith("AL201 not checked") for note in m.notes)
        d.evidence.update(model=m.target, mode=m.mode, unused=[u.module or u.evidence.get("parameter") for u in unused])
        if unchecked:
            d.message += (f" ({m.target}'s forward reads tensor values in Python, so archlint cannot tell whether "
                          "some parameters go unused)")
        elif unused:
            names = ", ".join(str(n) for n in d.evidence["unused"][:3]) + (" …" if len(unused) > 3 else "")
            d.message += f" (needed here: {m.target}'s {m.mode}-mode forward leaves {names} unused, AL201)"
        elif m.mode == "train":
            d.message += (f" ({m.target}'s train-mode forward reads every parameter, AL201 found none unused: "
                          "the flag only costs its walk on every step)")
            d.severity = Severity.WARNING
        else:  # eval mode: the training forward may differ (auxiliary heads, layers dropped in training)
            d.message += (f" ({m.target}'s eval-mode forward reads every parameter; analyze it with --train to check "
                          "the training forward)")
