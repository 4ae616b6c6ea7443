"""One finding where the trace and the code linter see the same problem at the same place.

A trace finding located by the trace's stacks names the user's function (`train.py(4):
train_step`: the line of its `def`, or for a frame already running when profiling began, the
line it was at). When the code linter flags the matching pattern inside that same function (a sync: AL401; the loader: AL301/AL304; a pageable copy: AL301/AL302; DataParallel:
AL406; accumulation without no_sync: AL409), the code finding keeps its exact line and takes the
trace's measured price, and the trace finding is dropped: the two are one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from archlint.diagnostics import Diagnostic

RELATED = {
    "AL501": ("AL301", "AL304"),
    "AL502": ("AL301", "AL302"),
    "AL503": ("AL401",),
    "AL506": ("AL406",),
    "AL507": ("AL409",),
}


def link(trace_findings: list[Diagnostic], code_findings: list[Diagnostic]) -> list[Diagnostic]:
    """The trace findings left once each one the code linter also found has merged into it."""
    kept = []
    for t in trace_findings:
        matches = [
            c
            for c in code_findings
            if t.file
            and c.file
            and c.line
            and c.code in RELATED.get(t.code, ())
            and Path(c.file).name == Path(t.file).name
            and _same_function(str(Path(c.file).resolve()), c.line, t.line)
        ]
        for c in matches:
            c.price = t.price
            c.evidence = {**c.evidence, "trace": {"code": t.code, "file": t.target, "message": t.message}}
            c.message += f" — measured in {Path(t.target or '').name}: {t.message}"
        if not matches:
            kept.append(t)
    return kept


def _same_function(path: str, code_line: int, trace_line: int | None) -> bool:
    """Whether the innermost function around the code finding's line spans the trace's line (from
    its first decorator, Python's co_firstlineno, to its end)."""
    if trace_line is None:
        return False
    spans = [
        (n.decorator_list[0].lineno if n.decorator_list else n.lineno, n.end_lineno or n.lineno)
        for n in _functions(path)
        if n.lineno <= code_line <= (n.end_lineno or n.lineno)
    ]
    if not spans:
        return False
    first, last = min(spans, key=lambda s: s[1] - s[0])
    return first <= trace_line <= last


@functools.lru_cache(maxsize=64)
def _functions(path: str) -> tuple[ast.AST, ...]:
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return ()
    return tuple(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
