"""AL520: the optimizer step launches a large share of the step's GPU work (torch.optim's
`Optimizer.step#<Class>.step` range), and what it spends it on."""

from __future__ import annotations

import re

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, share

CODE = "AL520"
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()  # what a change returns depends on the optimizer: said, not priced
FIX = "none"
OPTIONS = {"min_share": 0.05}  # the optimizer step's GPU work per call, as a share of step time

# torch.optim wraps every step() in record_function(f"Optimizer.step#{cls.__name__}.step")
_RANGE = re.compile(r"^Optimizer\.step#(?P<cls>[A-Za-z_][\w.]*)\.step$")
# the torch.optim classes whose step has a fused implementation (fused=True: one kernel per group of tensors)
_FUSED = ("Adam", "AdamW", "SGD", "Adagrad")


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    step = t.mean_step_us()
    if not step or not t.steps or t.cpu_only:
        return []
    out = []
    for row in t.modules:
        match = _RANGE.match(row["name"])
        if match is None or not row["calls"]:
            continue
        # every call the trace holds (warm-up steps too): the mean per call against the steady step
        per_call, own = row["gpu_us"] / row["calls"], row["self_gpu_us"] / row["calls"]
        if per_call / step < options["min_share"]:
            continue
        cls = match.group("cls")
        nested = per_call - own
        parts = f"{ms(own)} in kernels it launches itself"
        if nested > 0.05 * per_call:
            parts += f", {ms(nested)} inside ranges it opens (its collectives and ops: the module table names them)"
        if cls in _FUSED:
            advice = (
                f"torch.optim.{cls}(..., fused=True) runs the update as one kernel per group of tensors, each "
                "read and written once (AL611 prices it on the model with --train); check the step's kernels "
                "in the trace if it is fused already"
            )
        else:
            advice = (
                f"{cls} is not a torch.optim class with a fused step: its cost is its design (a preconditioner, "
                "per-layer norms, sharded state gathered each step): run its expensive part less often or "
                "overlap its communication with compute"
            )
        out.append(
            finding(
                t,
                CODE,
                f"{cls}.step launches {ms(per_call)} of GPU work per call ({share(per_call, step)} of the {ms(step)} "
                f"{t.unit}): {parts}; {advice}",
                saving_us=None,
                alternative=advice,
                evidence={
                    "optimizer": cls,
                    "calls": row["calls"],
                    "gpu_us_per_call": round(per_call, 3),
                    "self_gpu_us_per_call": round(own, 3),
                    "share_of_step": round(per_call / step, 4),
                },
                severity=Severity.INFO,
            )
        )
    return out
