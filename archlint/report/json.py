"""--output-format json: the contract of DESIGN.md (version 1), plus extra fields."""

from __future__ import annotations

import json

from archlint.config import Settings
from archlint.result import RunResult


def render(result: RunResult, settings: Settings) -> str:
    return json.dumps(result.to_dict(), indent=2) + "\n"
