"""The CI gate: budgets per model (baselines arrive with issue 6)."""

from __future__ import annotations

from archlint.config import ModelSpec, Settings
from archlint.result import GateResult, RunResult

_METRIC = {"max-flops": "flops", "max-mac": "mac_bytes", "max-params": "params", "max-latency-ms": "latency_ms"}


def evaluate(result: RunResult, specs: list[ModelSpec], settings: Settings) -> list[GateResult]:
    checks = []
    for spec, model in zip(specs, result.models):
        for budget, limit in spec.budgets.items():
            actual = getattr(model.totals, _METRIC[budget])
            if actual is None:
                checks.append(GateResult(model.target, budget, False, f"{budget} needs --latency", None, limit))
                continue
            passed = actual <= limit
            over = (actual - limit) / limit
            message = f"{actual:.6g} ≤ {limit:.6g}" if passed else f"{actual:.6g} > {limit:.6g} (+{over:.1%})"
            checks.append(GateResult(model.target, budget, passed, message, actual, limit))
    return checks
