"""`archlint trace NEW --diff BASE`: what got slower between two traces of the same job, per step,
by kernel group and by module (as HTA's trace diff compares two runs): pure functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from archlint.trace.analyze import TraceAnalysis


@dataclass
class TraceDiff:
    base: str
    new: str
    step_us: tuple[float, float]  # mean wall time of a complete step: base, new
    breakdown: dict[str, tuple[float, float]]  # idle/compute/non-compute per step: base, new
    groups: list[dict[str, Any]] = field(default_factory=list)  # per-step GPU µs by kernel group
    modules: list[dict[str, Any]] = field(default_factory=list)  # per-step GPU µs by module

    def to_dict(self) -> dict[str, Any]:
        pair = lambda p: {"base": round(p[0], 3), "new": round(p[1], 3), "change": _change(*p)}  # noqa: E731
        return {
            "base": self.base,
            "new": self.new,
            "step_us": pair(self.step_us),
            "breakdown": {k: pair(v) for k, v in self.breakdown.items()},
            "groups": self.groups,
            "modules": self.modules,
        }


def _change(before: float, after: float) -> float | None:
    return round((after - before) / before, 4) if before else None


def _per_step(t: TraceAnalysis, total: float) -> float:
    return total / max(1, len(t.per_step))


def _rows(base: dict[str, float], new: dict[str, float]) -> list[dict[str, Any]]:
    rows = [
        {
            "name": name,
            "base_us": round(base.get(name, 0.0), 3),
            "new_us": round(new.get(name, 0.0), 3),
            "delta_us": round(new.get(name, 0.0) - base.get(name, 0.0), 3),
            "change": _change(base.get(name, 0.0), new.get(name, 0.0)),
        }
        for name in set(base) | set(new)
    ]
    return sorted(rows, key=lambda r: (-r["delta_us"], r["name"]))  # ties by name: never in hash order


def diff(base: TraceAnalysis, new: TraceAnalysis) -> TraceDiff:
    def step_mean(t: TraceAnalysis, key: str) -> float:
        w = t.windows
        return sum(getattr(s, key) for s in w) / len(w) if w else 0.0

    return TraceDiff(
        base=base.file,
        new=new.file,
        step_us=(base.mean_step_us(), new.mean_step_us()),
        breakdown={k: (step_mean(base, k), step_mean(new, k)) for k in ("compute_us", "non_compute_us", "idle_us")},
        groups=_rows(
            {g: _per_step(base, us) for g, us in base.groups.items()},
            {g: _per_step(new, us) for g, us in new.groups.items()},
        ),
        modules=_rows(
            {m["name"]: _per_step(base, m["gpu_us"]) for m in base.modules},
            {m["name"]: _per_step(new, m["gpu_us"]) for m in new.modules},
        )[:20],
    )
