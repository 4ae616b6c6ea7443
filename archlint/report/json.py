"""--output-format json: the contract of docs/design.md (version 1), plus extra fields.

JSON has no NaN or Infinity (Python writes them; every other parser rejects the file): a number
that is not finite is written as null, and `non_finite` says where and what it was.
"""

from __future__ import annotations

import json
import math
from typing import Any

from archlint.config import Settings
from archlint.result import RunResult


def render(result: RunResult, settings: Settings) -> str:
    replaced: dict[str, str] = {}
    document = finite(result.to_dict(), "", replaced)
    if replaced:
        document["non_finite"] = replaced
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def finite(value: Any, path: str, replaced: dict[str, str]) -> Any:
    """`value` with every NaN/±Infinity float made None; `replaced` maps each one's path
    (`models[0].what_if[2].max_abs_diff`) to what it was ("NaN", "Infinity", "-Infinity")."""
    if isinstance(value, float) and not math.isfinite(value):
        replaced[path] = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return None
    if isinstance(value, dict):
        return {k: finite(v, f"{path}.{k}" if path else str(k), replaced) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, f"{path}[{i}]", replaced) for i, v in enumerate(value)]
    return value
