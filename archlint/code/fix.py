"""--fix and --diff: apply the fixes of selected findings as text edits, re-lint, repeat.

Re-linting after each round (as ruff does) means a fix that makes another finding appear (pinning a
loader makes its copies eligible for non_blocking) is applied in the same run, so a second --fix
changes nothing. A round whose result no longer parses is dropped and the file left as it was.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from archlint.code import guard, notebook
from archlint.code.engine import lint_text, parse_error
from archlint.code.source import SourceError, decode, encode, line_offsets
from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic, Edit

MAX_ROUNDS = 10


def _offset(offsets: list[int], line: int, column: int) -> int:
    return offsets[line - 1] + column - 1


def _kept(text: str, edits: list[Edit]) -> tuple[list[tuple[int, int, str]], set[int]]:
    """The non-overlapping edits as (start, end, content) spans (the first of two overlapping ones
    wins; a repeat of a taken edit counts as taken), and the indices of the edits taken."""
    offsets = line_offsets(text)
    spans = sorted(
        ((_offset(offsets, e.start_line, e.start_column), _offset(offsets, e.end_line, e.end_column), e.content, i)
         for i, e in enumerate(edits)),
        key=lambda s: (s[0], s[1]),
    )
    kept, taken, last_end = [], set(), -1
    for start, end, content, i in spans:
        if kept and start == kept[-1][0] == end == kept[-1][1] and content == kept[-1][2]:
            taken.add(i)  # the same insertion twice (two findings, one fix): done once
            continue
        if start < last_end:
            continue  # overlaps an edit already taken; the next round will see it
        kept.append((start, end, content))
        taken.add(i)
        last_end = max(last_end, end)
    return kept, taken


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, int]:
    """Apply non-overlapping edits (the first of two overlapping ones wins); returns (text, applied)."""
    kept, _ = _kept(text, edits)
    for start, end, content in reversed(kept):
        text = text[:start] + content + text[end:]
    return text, len(kept)


def fixable(d: Diagnostic, settings: Settings) -> bool:
    return d.fix is not None and (d.fix.applicability is Applicability.SAFE or settings.unsafe_fixes)


class Remaining(list):
    """The findings that remain after --fix (a list of Diagnostic), and how many were fixed."""

    fixed: int = 0


def _lint(text: str, path: str, context: dict | None):
    return lint_text(text, path, context) if context else lint_text(text, path)


def fix_text(text: str, path: str, settings: Settings, context: dict | None = None) -> tuple[str, Remaining]:
    """(fixed text, findings that remain in it; `.fixed`: how many findings the fixes removed);
    `context`: what the project says about the file."""
    from archlint.code.lint import selected

    diagnostics = selected(_lint(text, path, context), settings)
    fixed = 0
    for _ in range(MAX_ROUNDS):
        owners = [(n, e) for n, d in enumerate(diagnostics) if fixable(d, settings) for e in d.fix.edits]
        edits = [e for _, e in owners]
        if not edits:
            break
        _, taken = _kept(text, edits)
        whole = {n for n, _ in owners} - {n for i, (n, _) in enumerate(owners) if i not in taken}
        candidate, applied = apply_edits(text, edits)
        if not applied or candidate == text:
            break
        try:  # compiled to bytecode, never run: catches what the parser alone lets through
            compile(candidate, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as err:
            print(f"archlint: warning: {path}: fixes not applied, the result would not parse "
                  f"({err}); please report this", file=sys.stderr)
            break
        text = candidate
        fixed += len(whole)  # findings whose every edit went in this round
        diagnostics = selected(_lint(text, path, context), settings)
    remaining = Remaining(diagnostics)
    remaining.fixed = fixed
    return text, remaining


def fix_files(files: list[Path], settings: Settings, contexts: dict | None = None) -> Remaining:
    """Fix (or with --diff, print the diff of) each file; the findings that remain, with `.fixed`
    the number fixed (with --diff: that the diff would fix)."""
    remaining = Remaining()
    for path in files:
        context = (contexts or {}).get(path)
        name = str(path)
        try:
            data = guard.read_regular(path, settings.max_file_size)
        except guard.Skip as exc:
            remaining.append(guard.skipped(name, str(exc)))
            continue
        except OSError as exc:
            remaining.append(parse_error(name, f"cannot read file: {exc.strerror or exc}; check its permissions", 1, 1))
            continue
        nb = None
        try:
            if notebook.is_notebook(path):  # fixed as its code cells' Python text, written back as JSON
                nb = notebook.Notebook.parse(data)
            original, encoding, bom = (nb.python, "utf-8", False) if nb else decode(data)
        except (SourceError, notebook.NotebookError) as exc:
            remaining.append(parse_error(name, str(exc), 1, 1))
            continue
        located = nb.locate if nb else (lambda d: d)
        fixed, after = fix_text(original, name, settings, context)
        if fixed == original:
            remaining.fixed += after.fixed
            remaining += map(located, after)
            continue
        if settings.diff:
            remaining.fixed += after.fixed
            sys.stdout.writelines(_diff(original, fixed, name, nb))
            remaining += map(located, selected_before(original, name, settings, context))
            continue
        try:
            if nb and not nb.writable:
                raise notebook.NotebookError("its JSON layout is not one archlint can write back unchanged")
            new = nb.rebuild(fixed) if nb else encode(fixed, encoding, bom)
        except notebook.NotebookError as exc:
            print(f"archlint: warning: {name}: cannot write the fixes ({exc}); left unchanged", file=sys.stderr)
            remaining += map(located, selected_before(original, name, settings))
            continue
        try:
            path.write_bytes(new)
        except OSError as exc:  # read-only file or folder: its findings stay, the other files go on
            print(f"archlint: warning: {name}: cannot write the fixes ({exc.strerror or exc}); "
                  "left unchanged", file=sys.stderr)
            remaining += map(located, selected_before(original, name, settings))
            continue
        remaining.fixed += after.fixed
        remaining += map(located, after)
    return remaining


def _diff(original: str, fixed: str, name: str, nb) -> list[str]:
    """A unified diff of the file; for a notebook, one per changed code cell (`name:cell N`)."""
    if nb is None:
        return list(difflib.unified_diff(original.splitlines(keepends=True), fixed.splitlines(keepends=True),
                                         name, name))
    before, after = (text.split(notebook.BOUNDARY + "\n") for text in (original, fixed))
    if len(before) != len(after):
        return list(difflib.unified_diff(original.splitlines(keepends=True), fixed.splitlines(keepends=True),
                                         name, name))
    out = []
    for index, old, new in zip(nb.code_cells, before, after):
        label = f"{name}:cell {index + 1}"
        old, new = ([nb.restored(line.rstrip("\n")) + "\n" for line in text.splitlines()] for text in (old, new))
        out += difflib.unified_diff(old, new, label, label)
    return out


def selected_before(text: str, path: str, settings: Settings, context: dict | None = None) -> list[Diagnostic]:
    from archlint.code.lint import selected

    return selected(_lint(text, path, context), settings)
