"""The CI gate: budgets per model, and baselines that catch regressions while grandfathering
what was already there (the way ruff's and mypy's baselines let a team adopt a linter on old code).

A baseline is a JSON file with each model's totals and a fingerprint per finding. A fingerprint
leaves out line numbers and measured figures, so moving code or retraining does not break it:
  code finding:  code + file (relative to the project root) + the flagged line's text
  model finding: code + target + module path (or the OpGraph node when no module is known)
Findings are compared as a multiset: a baseline with two identical fingerprints grandfathers two.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.result import GateResult, RunResult
from archlint.units import significant

BASELINE_VERSION = 1
_METRIC = {"max-flops": "flops", "max-mac": "mac_bytes", "max-params": "params", "max-latency-ms": "latency_ms"}
# Allowed growth versus the baseline. Counts are exact, so a few percent only lets small edits
# through; latency is measured and drifts between runs of the same code, so it gets more room.
DEFAULT_TOLERANCE = {"flops": 0.02, "mac_bytes": 0.02, "params": 0.02, "latency_ms": 0.25}
_LABEL = {"flops": "FLOPs", "mac_bytes": "MAC", "params": "params", "latency_ms": "latency"}


def fails(diagnostics: list[Diagnostic]) -> bool:
    """Findings fail a run unless they are advisory (info severity, code or model): advice never gates."""
    return any(not d.advisory for d in diagnostics)


def evaluate(result: RunResult, specs: list[ModelSpec], settings: Settings) -> list[GateResult]:
    """Budget and baseline checks. Removes grandfathered findings from result.diagnostics."""
    checks = budgets(result, specs)
    baseline = None
    if settings.save_baseline is not None:
        baseline = snapshot(result, settings)
        write_baseline(baseline, settings.save_baseline)
        checks.append(GateResult("baseline", "baseline:saved", True, f"wrote {settings.save_baseline}"))
    if settings.baseline is not None:
        baseline = read_baseline(settings.baseline)
    if baseline is not None:
        checks += regressions(result, baseline, settings)
        checks += grandfather(result, baseline, settings)
    return checks


# ── budgets ────────────────────────────────────────────────────────────────────────────────────


def budgets(result: RunResult, specs: list[ModelSpec]) -> list[GateResult]:
    checks = []
    for spec, model in zip(specs, result.models):
        for budget, limit in spec.budgets.items():
            metric = _METRIC[budget]
            actual = getattr(model.totals, metric)
            basis = ""
            estimate = model.estimate
            if actual is None and metric == "latency_ms" and estimate:
                # No measurement: the device-spec estimate stands in, and the verdict says so.
                actual, basis = estimate.latency_ms, f" (estimated on {estimate.device_spec}, not measured)"
            if actual is None:
                checks.append(
                    GateResult(model.target, budget, False, f"{budget} needs --latency or --device-spec", None, limit)
                )
                continue
            passed = actual <= limit
            if passed:
                message = f"{_fmt(actual, metric)}{basis} ≤ budget {_fmt(limit, metric)}"
            else:  # a budget of 0 has no percentage to exceed it by
                by = f" by {(actual - limit) / limit:.1%}" if limit else ""
                message = f"{_fmt(actual, metric)}{basis} exceeds budget {_fmt(limit, metric)}{by}"
            checks.append(GateResult(model.target, budget, passed, message, actual, limit))
    return checks


def _findings(n: int, kind: str = "") -> str:
    return f"{n} {kind}finding{'s' * (n != 1)}"


def _fmt(value: float, metric: str) -> str:
    """1.814G FLOPs, 12.3 MB (MAC), 11.69M params, 4.2 ms."""
    if metric == "latency_ms":
        return f"{significant(value)} ms"
    prefix = ""
    for prefix in ("", "K", "M", "G", "T"):
        if abs(value) < 1000 or prefix == "T":
            break
        value /= 1000
    if metric == "mac_bytes":
        return f"{significant(value, 4)} {prefix}B"
    return f"{significant(value, 4)}{prefix} {'FLOPs' if metric == 'flops' else 'params'}"


# ── baselines ──────────────────────────────────────────────────────────────────────────────────


def fingerprint(d: Diagnostic, settings: Settings) -> str:
    return hashlib.sha256("\x1f".join(_identity(d, settings)).encode("utf-8", "surrogateescape")).hexdigest()[:20]


def _identity(d: Diagnostic, settings: Settings) -> tuple[str, ...]:
    if d.target is not None or d.node is not None:
        return (d.code, _target(d.target or "", settings), _subject(d))
    if d.file is None:
        return (d.code, d.message)
    return (d.code, settings.relpath(d.file), _line_text(d.file, d.line) or d.message)


def _target(target: str, settings: Settings) -> str:
    """A target as the baseline keys it: its file relative to the project root, whatever the
    directory archlint ran from (a target outside the root stays as written)."""
    path, sep, name = target.rpartition(":")
    if not (sep and path):
        return target
    file = settings.relpath(path)
    return f"{file if not Path(file).is_absolute() else Path(path).as_posix()}:{name}"


def _line_text(file: str, line: int | None) -> str | None:
    """The flagged line with whitespace collapsed: survives moves and re-indentation."""
    if line is None:
        return None
    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else None


def _subject(d: Diagnostic) -> str:
    """The module path ("" is the model itself); the node only when no module is known, since
    node names shift when ops are added upstream."""
    return d.module if d.module is not None else (d.node or "")


def _where(d: Diagnostic, settings: Settings) -> str:
    if d.target is not None or d.node is not None:
        return f"{_target(d.target or '', settings)} [{_subject(d) or '<model>'}]"
    return f"{settings.relpath(d.file)}:{d.line}" if d.file else "<unknown>"


def snapshot(result: RunResult, settings: Settings) -> dict:
    """What --save-baseline writes: deterministic, so the file diffs cleanly in review."""
    models = {
        _target(m.target, settings): {
            "flops": m.totals.flops,
            "mac_bytes": m.totals.mac_bytes,
            "params": m.totals.params,
            "latency_ms": m.totals.latency_ms,
            "device": m.device,
            "dtype": m.dtype,
            "input_shapes": m.input_shapes,
        }
        for m in result.models
    }
    findings = sorted(
        (
            {
                "fingerprint": fingerprint(d, settings),
                "code": d.code,
                "where": _where(d, settings),
                "message": d.message,
            }
            for d in result.diagnostics
        ),
        key=lambda f: (f["code"], f["where"], f["fingerprint"]),
    )
    return {"archlint_baseline": BASELINE_VERSION, "models": dict(sorted(models.items())), "findings": findings}


def write_baseline(baseline: dict, path: Path) -> None:
    """Whole or not at all (archlint.outputs): a kill or a full disk never cuts the team's baseline."""
    from archlint.outputs import write_text

    write_text(path, json.dumps(baseline, indent=2, ensure_ascii=False) + "\n", "the baseline")


def read_baseline(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except FileNotFoundError:
        raise UsageError(f"baseline file {path} does not exist; create it with --save-baseline {path}") from None
    except IsADirectoryError:
        raise UsageError(f"baseline {path} is a folder; give the file --save-baseline wrote") from None
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(
            f"baseline file {path} is not valid JSON ({' '.join(str(exc).split())[:200]}); "
            "recreate it with --save-baseline"
        ) from None
    except OSError as exc:
        raise UsageError(f"baseline file {path} cannot be read ({exc.strerror or exc})") from None
    if (
        not isinstance(data, dict)
        or data.get("archlint_baseline") != BASELINE_VERSION
        or not isinstance(data.get("models"), dict)
        or not isinstance(data.get("findings"), list)
    ):
        raise UsageError(
            f"baseline file {path} is not an archlint baseline (version {BASELINE_VERSION}); recreate it with --save-baseline"
        )
    problem = _malformed(data)
    if problem:
        raise UsageError(f"baseline file {path} is malformed: {problem}; recreate it with --save-baseline")
    return data


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _malformed(data: dict) -> str | None:
    """What is wrong in a baseline that has the right outline (a hand edit, a merge conflict)."""
    for target, entry in data["models"].items():
        if not isinstance(entry, dict):
            return f"model {target!r} maps to {type(entry).__name__}, not an object of metrics"
        for metric in DEFAULT_TOLERANCE:
            value = entry.get(metric)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf")
            ):
                return f"model {target!r} has {metric} {value!r}, not a finite number ≥ 0"
    for i, finding in enumerate(data["findings"]):
        if not isinstance(finding, dict) or not isinstance(finding.get("fingerprint"), str):
            return f"finding {i + 1} has no fingerprint string"
    return None


def regressions(result: RunResult, baseline: dict, settings: Settings) -> list[GateResult]:
    """A metric that grew by more than its tolerance fails; shrinking never does."""
    tolerance = {**DEFAULT_TOLERANCE, **settings.tolerance}
    checks = []
    for model in result.models:
        target = _target(model.target, settings)
        before = baseline["models"].get(target)
        if before is None:
            checks.append(GateResult(model.target, "baseline", True, "not in the baseline; nothing to compare"))
            continue
        for metric, allowed in tolerance.items():
            old, new = before.get(metric), getattr(model.totals, metric)
            if old is None or new is None:
                continue  # latency is only compared when both runs measured it
            growth = (new - old) / old if old else (0.0 if new == old else float("inf"))
            passed = growth <= allowed
            change = f"{_fmt(old, metric)} → {_fmt(new, metric)}, tolerance {allowed * 100:g}%"
            label = _LABEL[metric]
            message = (
                f"{label} {growth:+.1%} ({change})"
                if passed
                else f"{label} grew {growth:+.1%} over the baseline ({change})"
            )
            checks.append(GateResult(model.target, f"baseline:{metric}", passed, message, new, old * (1 + allowed)))
    return checks


def grandfather(result: RunResult, baseline: dict, settings: Settings) -> list[GateResult]:
    """Drop findings the baseline already has from the failing set; report the new ones."""
    allowed = Counter(f.get("fingerprint") for f in baseline["findings"])
    kept, known = [], 0
    for d in result.diagnostics:
        key = fingerprint(d, settings)
        if allowed[key] > 0:
            allowed[key] -= 1
            known += 1
        else:
            kept.append(d)
    result.diagnostics = kept
    checks = [
        GateResult("baseline", "baseline:known-findings", True, f"{_findings(known)} in the baseline not reported")
    ]
    kept = [d for d in kept if not d.advisory]  # advisory findings never fail a gate
    if kept:
        names = ", ".join(f"{d.code} at {_where(d, settings)}" for d in kept[:5])
        more = f" and {len(kept) - 5} more" if len(kept) > 5 else ""
        checks.append(
            GateResult(
                "baseline",
                "baseline:new-findings",
                False,
                f"{_findings(len(kept), 'new ')} not in the baseline: {names}{more}",
            )
        )
    return checks
