"""Which findings a run reports: --select/--ignore/per-file-ignores, shared by the linter (lint.py)
and --fix (fix.py), which fixes only what it would report."""

from __future__ import annotations

from archlint.code.engine import PARSE_ERROR
from archlint.config import Settings
from archlint.diagnostics import Diagnostic, Severity


def selected(diagnostics: list[Diagnostic], settings: Settings) -> list[Diagnostic]:
    # A file that could not be read or parsed is always reported; one skipped on purpose (too
    # large, too complex: an info finding) can be ignored like a rule, e.g. per file.
    return [
        d
        for d in diagnostics
        if (d.code == PARSE_ERROR and d.severity is Severity.ERROR) or settings.enabled(d.code, d.file)
    ]
