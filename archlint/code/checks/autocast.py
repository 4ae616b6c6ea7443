"""AL403: a CUDA training loop that never uses automatic mixed precision."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.diagnostics import Diagnostic, Price, Severity
from archlint.model_of import model_of
from archlint.result import ModelResult, WhatIf
from archlint.units import significant, times

CODES = ("AL403",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)
FIX = "none"
PRICED_BY_WHAT_IF = (
    "bf16",
    "fp16",
)  # its fix is autocast: the analyzed model's 16-bit what-if prices it (price_with_models)
# Anything that shows the file already chose a precision: autocast, a scaler, half/bf16 models,
# or a framework that configures precision itself.
_PRECISION_SIGNS = {"autocast", "GradScaler", "bfloat16", "float16", "half"}
# apex counts only for its precision modules: `apex.parallel.LARC` or `apex.optimizers` choose nothing.
_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "deepspeed", "apex.amp", "apex.fp16_utils")


def check(facts: Facts):
    if not facts.uses_cuda or facts.idents & _PRECISION_SIGNS:
        return
    if any(facts.imports.uses(f) for f in _FRAMEWORKS) or _apex_amp(facts) or _imported_precision(facts):
        return
    batch = {id(other.loop) for other in df.batch_loops(facts)}
    for bl in df.training_loops(facts):
        if (
            id(bl.loop.parent) not in batch
            and not _step_helper_chooses(bl, facts)
            and not (facts.project.amp and not bl.loop.has_backward)
        ):  # the step is elsewhere, near a precision choice
            yield Finding(
                "AL403",
                bl.loop.node,
                "CUDA training loop runs in float32: wrap the forward pass and loss in "
                'torch.autocast("cuda", dtype=torch.bfloat16) to use tensor cores (often 2-3x faster)',
            )


def _apex_amp(facts: Facts) -> bool:
    """`import apex` then `apex.amp.initialize(...)`."""
    return any(
        (facts.qname(site.node.func, site.scope) or "").startswith(("apex.amp.", "apex.fp16_utils."))
        for site in facts.calls
    )


def _imported_precision(facts: Facts) -> bool:
    """A project or library helper named for it: `from utils import NativeScaler, get_autocast_ctx`."""
    return any(word in local.lower() for local in facts.imports.names for word in ("autocast", "scaler", "amp_"))


def _step_helper_chooses(bl, facts: Facts) -> bool:
    """The backward runs in a project function whose module chooses a precision."""
    return any(facts.project.name(df.dotted(site.node.func)).get("amp") for site in bl.loop.calls)


# The price: AL403 against the model analyzed in the same run (archlint.check calls it).


def price_with_models(diagnostics: list[Diagnostic], models: list[ModelResult]) -> None:
    """Price each AL403 finding with the analyzed model's what-if (bf16/fp16, or the device-spec
    estimate), of the model its file trains (archlint.model_of): the only model analyzed, else the one model defined in the finding's file or in a module it imports.
    As for model findings, one model's saving prices one finding: with several findings on the
    same model, none is priced. With a GPU device spec, the spec's 16-bit estimate is the basis
    (the measured figure is quoted beside it); without, a what-if that is not faster beyond the
    noise never prices: the finding says the measurement found no speed-up. A --train model is
    priced on its training step, forward and backward (`_step_price`): the spec's estimate of the
    step under autocast, else the what-if's forward speed-up applied to the measured step's
    forward and backward; a what-if is then not needed where the step's estimate is there."""
    # a --decode step is not a training step; a --train model is one
    models = [m for m in models if m.phase in (None, "train") and (m.what_if or _step_autocast(m))]
    for code, names in (("AL403", PRICED_BY_WHAT_IF),):
        found: dict[int, list[Diagnostic]] = {}
        for d in diagnostics:
            if d.code == code and d.file:
                m = model_of(d.file, models)
                if m is not None:
                    found.setdefault(id(m), []).append(d)
        for m in models:
            linked = found.get(id(m), [])
            w = next(
                (w for name in names for w in m.what_if or () if w.name == name and w.applicable and w.speedup), None
            )
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
                    d.message += (
                        f" (--what-if {w.name} measured no speed-up on the forward of {m.target} on {m.device}: "
                        f"{times(w.speedup)}, {state})"
                    )
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
                    saving_ms=w.baseline_ms * (1 - 1 / w.speedup),
                    model_ms=w.baseline_ms,
                    basis="estimated",
                    device=m.device,  # where the what-if was measured
                )


def _estimated_price(m: ModelResult, estimate: dict, measured: str) -> Price:
    """The device-spec estimate of the forward in 16 bits against float32."""
    fp32, half, spec = m.estimate.latency_ms, estimate["latency_ms"], m.estimate.device_spec
    return Price.timed(
        f"{estimate['dtype']} autocast estimated {fp32 / half:.2f}× on the forward of {m.target} on {spec} "
        f"({significant(fp32)} ms in float32, {significant(half)} ms with {estimate['assumption']}); {measured}; the training step may differ",
        saving_ms=fp32 - half,
        model_ms=fp32,
        basis="estimated",
        device=spec,
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
            saving_ms=fp32["step_ms"] - estimate["step_ms"],
            model_ms=fp32["step_ms"],
            basis="estimated",
            device=spec,
        )
        d.price.whole = "the training step's estimated time"
        d.evidence["priced_on"] = "training step: forward and backward under autocast (device-spec estimate)"
    elif w is not None and measured and w.verdict == "faster":
        both = measured["forward_ms"] + measured["backward_ms"]
        d.price = Price.timed(
            f"{w.name} autocast: the forward's measured {times(w.speedup)} applied to the measured step's forward and "
            f"backward ({significant(both)} of {significant(measured['step_ms'])} ms on {m.device}; the backward assumed to speed up as "
            "the forward does)",
            saving_ms=both * (1 - 1 / w.speedup),
            model_ms=measured["step_ms"],
            basis="estimated",
            device=m.device,
        )
        d.price.whole = "the training step's measured time"
        d.evidence["priced_on"] = "training step: forward and backward, from the forward's measured speed-up"
    elif w is not None and w.verdict == "faster":
        d.price = Price.timed(
            f"{w.name} autocast measured {times(w.speedup)} on the forward of {m.target} on {m.device}; the backward "
            "was not timed (--latency times the step)",
            saving_ms=w.baseline_ms * (1 - 1 / w.speedup),
            model_ms=w.baseline_ms,
            basis="estimated",
            device=m.device,
        )
        d.evidence["priced_on"] = "forward only: give --latency or a GPU --device-spec to price the training step"
    elif w is not None:
        d.message += (
            f" (--what-if {w.name} measured no speed-up on the forward of {m.target} on {m.device}: "
            f"{times(w.speedup)}, {w.verdict or 'no spread measured'})"
        )


def _evidence(w: WhatIf, m: ModelResult) -> dict:
    return {
        "name": w.name,
        "model": m.target,
        "device": m.device,
        "pass": "forward (inference)",
        "speedup": w.speedup,
        "spread": w.spread,
    }
