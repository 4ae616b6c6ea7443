"""Which model findings are warnings: one materiality rule for every model rule.

A rule proposes a finding's severity from what it knows about the advice (a warning, or info when
the alternative changes the model, the module is train-only, or it only runs in a library). This
module then decides, for all rules alike, once repeats are merged: first each op's saving gets one
owner (`settle`, by the rules' PRIORITY: a finding naming another's op is info), then a warning must

- have a price that pays: a saving that is there (not missing), positive and at least
  `min_saving_share` of the model (every model rule takes that option, default FLOOR) on the
  price's basis — the model's MAC statically, its time when timed or estimated;
- with --latency, not rest on a figure inside the noise: when the floor lies within the share's
  range over the end-to-end passes' interquartile range, the measured share cannot decide and the
  static (MAC) share does, and the finding says so;
- keep the model as it is: an alternative that changes what the model computes (a new channel
  split, fewer groups, a shortcut removed: evidence "changes_model") needs retraining — info,
  and the message says so;
- be located where the user can act: a module below the model's root, or an op naming the ops
  it prices (its claims, or the chain in evidence "ops"), or a part of the training step named in
  evidence "step_part" (AL611: the optimizer); a model-wide total at the root is info.

Anything else is info (hidden by default, never fails a gate), with evidence["verdict"] saying why.

A statement agrees with its own figures: a rule whose message states figures of its price renders
it with `stated(d, render)`, and the verdict path renders it again once the price is final
(`restate`: after `settle` cuts an additive price, after `judge_again` reprices), keeping what was
said after it (the overlap note, the library switch).
"""

from __future__ import annotations

from collections.abc import Callable

from archlint.diagnostics import Diagnostic, Severity

OPTION = "min_saving_share"
FLOOR = 0.01  # a warning saves at least 1% of the model


def with_floor(options: dict) -> dict:
    """A model rule's declared options plus the materiality floor every model rule takes."""
    return {**options, OPTION: options.get(OPTION, FLOOR)}


def settle(found: list[Diagnostic], priority: dict[str, int]) -> list[Diagnostic]:
    """One op's saving is claimed by one finding: walking the findings from the most specific
    rule (the lowest PRIORITY its module declares), an additive price (AL104) drops the parts
    others own (its severity is judged after); any other finding that names an owned op becomes
    info and says which findings own it."""
    owner: dict[str, str] = {}
    for d in sorted(found, key=lambda d: priority[d.code]):
        p = d.price
        if p is None or not p.claims:
            continue
        taken = {c for c in p.claims if c in owner}
        if taken and p.parts is not None:
            p.without(taken)
            d.evidence["counted_by"] = sorted({owner[c] for c in taken})
            d.message += f" ({', '.join(d.evidence['counted_by'])} own part of these ops: the price counts the rest)"
        elif taken:
            d.severity = Severity.INFO
            d.evidence["overlaps"] = sorted({owner[c] for c in taken})
            continue
        for c in p.claims:
            owner.setdefault(c, d.code)
    return found


def judge(d: Diagnostic, options: dict, ctx, model_mac: int) -> None:
    """Lower a proposed warning to info when it does not pay, cannot be told from the noise, or
    has no place to act; evidence["verdict"] says which."""
    if d.evidence.get("changes_model") and "retrain" not in d.message:
        d.message += " (the alternative changes the model: it needs retraining)"
    if d.severity is not Severity.WARNING:
        return
    why = _why_not(d, options.get(OPTION, FLOOR), ctx, model_mac)
    if why:
        d.severity = Severity.INFO
        d.evidence["verdict"] = why
        d.evidence["proposed"] = Severity.WARNING.value  # what the rule proposed, for judge_again


def judge_again(d: Diagnostic, options: dict, ctx, model_mac: int) -> None:
    """Judge a finding whose price changed after the first verdict (a what-if timed its fix on the
    whole model): from the severity its rule proposed, on the new price."""
    if d.evidence.pop("proposed", None) == Severity.WARNING.value:
        d.severity = Severity.WARNING
        d.evidence.pop("verdict", None)
        d.evidence.pop("verdict_basis", None)
    restate(d)
    judge(d, options, ctx, model_mac)


def _why_not(d: Diagnostic, floor: float, ctx, model_mac: int) -> str | None:
    p = d.price
    if d.evidence.get("changes_model"):
        return "the alternative changes the model (retrain): advice for a new design, not a fix"
    if p is None:
        return "no price: nothing says what the advice saves"
    if not p.pays:
        amount = p.saving_ms if p.saving_ms is not None else p.mac_bytes_saved
        return f"no saving on the {p.basis} basis ({amount or 0})"
    if not located(d):
        return "a model-wide total at the model's root: no module or op chain to act on"
    share = p.saving_share
    pricer = ctx.pricer if ctx is not None else None  # no context: a finding judged on its own price
    if pricer is not None and p.basis != "measured":
        return f"with --latency the saving must be measured; this one is {p.basis} (the alternative was not timed)"
    if pricer is not None:
        band = _noise_band(p.saving_ms, pricer)
        if band and band[0] < floor <= band[1]:
            static = (p.mac_bytes_saved or 0) / model_mac if model_mac else 0.0
            d.evidence["verdict_basis"] = (
                f"static: the measured share {band[0]:.2%}–{band[1]:.2%} (over the passes' interquartile range) "
                f"straddles the {floor:.0%} floor"
            )
            share = static
            if share < floor:
                return f"saves {share:.2%} of the model's MAC (the measured share is inside the noise), under the {floor:.0%} floor"
            return None
    if share < floor:
        return f"saves {share:.2%} of the model on the {p.basis} basis, under the {floor:.0%} floor ({OPTION})"
    return None


def located(d: Diagnostic) -> bool:
    """At a module below the root, or at an op naming the ops it prices (its claims, or the op
    chain in evidence), or at a part of the training step (evidence "step_part": the optimizer's
    construction): the model's own forward is a place, a model-wide total is not."""
    claims = d.price.claims if d.price is not None else ()
    at_op = bool(d.node and (claims or d.evidence.get("ops")))
    return bool(d.module) or at_op or bool(d.evidence.get("step_part"))


def _noise_band(saving_ms: float | None, pricer) -> tuple[float, float] | None:
    """The saving's share of the model over the end-to-end passes' interquartile range."""
    spread = getattr(pricer, "end_to_end_spread_ms", None)
    if saving_ms is None or not spread or len(spread) != 2 or min(spread) <= 0:
        return None
    q1, q3 = sorted(spread)
    return saving_ms / q3, saving_ms / q1


_RENDER = "_render"  # attributes set on a Diagnostic by `stated` (not fields: never serialised)
_STATED = "_stated"


def stated(d: Diagnostic, render: Callable[[Diagnostic], str]) -> Diagnostic:
    """Give the finding its rule's statement, rendered from its price now and again by `restate`."""
    text = render(d)
    d.message = text
    setattr(d, _RENDER, render)
    setattr(d, _STATED, text)
    return d


def restate(d: Diagnostic) -> None:
    """Render the rule's statement again from the finding's final price, keeping what was added
    after it; a message rewritten since (not starting with the last statement) is left as it is."""
    render, before = getattr(d, _RENDER, None), getattr(d, _STATED, None)
    if render is None or before is None or not d.message.startswith(before):
        return
    text = render(d)
    d.message = text + d.message[len(before) :]
    setattr(d, _STATED, text)
