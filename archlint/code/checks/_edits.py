"""Text edits for fixes, computed from node positions so everything around them keeps its
formatting and comments."""

from __future__ import annotations

import libcst as cst

from archlint.code.facts import Facts
from archlint.diagnostics import Edit


def _at(pos) -> tuple[int, int]:
    return pos.line, pos.column + 1  # Edit columns are 1-based


def insert(line: int, column: int, text: str) -> Edit:
    return Edit(line, column, line, column, text)


def add_keyword(facts: Facts, call: cst.Call, text: str) -> Edit:
    """Add `name=value` as the last argument, in the call's own layout (one line or one per line)."""
    if not call.args:
        _, end = facts.position(call)
        return insert(end.line, end.column, text)  # just before the closing parenthesis
    last = call.args[-1]
    start, end = facts.position(last)
    call_start, _ = facts.position(call)
    line_text = facts.lines[start.line - 1]
    own_line = start.line != call_start.line and not line_text[: start.column].strip()
    if own_line:
        newline = facts.module.default_newline  # keep the file's own line endings
        return insert(*_at(end), f",{newline}{line_text[: start.column]}{text}")
    return insert(*_at(end), f", {text}")


def replace(facts: Facts, node: cst.CSTNode, text: str) -> Edit:
    start, end = facts.position(node)
    return Edit(*_at(start), *_at(end), text)


def delete_between(facts: Facts, first: cst.CSTNode, last: cst.CSTNode) -> Edit:
    """Delete from the end of `first` to the end of `last` (e.g. `.cuda()` after a call)."""
    _, a = facts.position(first)
    _, b = facts.position(last)
    return Edit(*_at(a), *_at(b), "")
