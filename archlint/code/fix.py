"""--fix and --diff: apply the fixes of selected findings as text edits, re-lint, repeat.

Re-linting after each round (as ruff does) means a fix that makes another finding appear (pinning a
loader makes its copies eligible for non_blocking) is applied in the same run, so a second --fix
changes nothing. A round whose result no longer parses is dropped and the file left as it was.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from archlint.code import guard, notebook, writeback
from archlint.code.engine import lint_text, parse_error
from archlint.code.project_facts import ProjectContext
from archlint.code.selection import selected
from archlint.code.source import SourceError, decode, encode, line_offsets, lines_with_ends
from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic, Edit
from archlint.printable import printable

MAX_ROUNDS = 10


def _offset(offsets: list[int], line: int, column: int) -> int:
    return offsets[line - 1] + column - 1


def _overlap(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _taken(text: str, fixes: list[tuple[Edit, ...]]) -> tuple[list[tuple[int, int, str]], list[int]]:
    """The fixes that go in whole, in the order of their first edit: one with an edit overlapping
    an edit already taken waits for the next round (a fix half applied could change what the
    code does). Returns their edits as sorted (start, end, content) spans, each once (two findings
    with the same fix share it), and the indices of the fixes taken."""
    offsets = line_offsets(text)
    spans = [
        [
            (_offset(offsets, e.start_line, e.start_column), _offset(offsets, e.end_line, e.end_column), e.content)
            for e in edits
        ]
        for edits in fixes
    ]
    kept: list[tuple[int, int, str]] = []
    taken = []
    for i in sorted((i for i in range(len(fixes)) if spans[i]), key=lambda i: min(spans[i])[:2]):
        new = [s for s in dict.fromkeys(spans[i]) if s not in kept]
        if any(_overlap(s, k) for s in new for k in kept):
            continue
        kept += new
        taken.append(i)
    kept.sort(key=lambda s: (s[0], s[1]))
    return kept, taken


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, content in reversed(spans):
        text = text[:start] + content + text[end:]
    return text


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, int]:
    """Apply non-overlapping edits (the first of two overlapping ones wins); returns (text, applied)."""
    spans, _ = _taken(text, [(e,) for e in edits])
    return _apply(text, spans), len(spans)


def fixable(d: Diagnostic, settings: Settings) -> bool:
    return d.fix is not None and (d.fix.applicability is Applicability.SAFE or settings.unsafe_fixes)


@dataclass
class Fixed:
    """What --fix did: the findings that remain, how many were fixed and with how many edits (with
    --fix: written to disk; with --diff: in the diff)."""

    remaining: list[Diagnostic] = field(default_factory=list)
    fixed: int = 0
    edits: int = 0


def _lint(text: str, path: str, context: ProjectContext | None):
    return lint_text(text, path, context) if context else lint_text(text, path)


def fix_text(text: str, path: str, settings: Settings, context: ProjectContext | None = None) -> tuple[str, Fixed]:
    """(fixed text, what was fixed in it and what remains); `context`: what the project says about
    the file."""
    diagnostics = selected(_lint(text, path, context), settings)
    fixed = edits = 0
    for _ in range(MAX_ROUNDS):
        fixes = [d.fix.edits for d in diagnostics if fixable(d, settings)]
        spans, taken = _taken(text, fixes)
        if not spans:
            break
        candidate = _apply(text, spans)
        if candidate == text:
            break
        try:  # compiled to bytecode, never run: catches what the parser alone lets through
            compile(candidate, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as err:
            print(
                f"archlint: warning: {printable(path)}: fixes not applied, the result would not parse "
                f"({err}); please report this",
                file=sys.stderr,
            )
            break
        text = candidate
        fixed += len(taken)
        edits += len(spans)
        diagnostics = selected(_lint(text, path, context), settings)
    return text, Fixed(diagnostics, fixed, edits)


def fix_files(
    files: list[Path], settings: Settings, contexts: dict | None = None, paths: list[Path] | None = None
) -> Fixed:
    """Fix (or with --diff, print the diff of) each file; the findings that remain, and `fixed` the
    number of findings whose fixes were written (with --diff: that the diff would fix). Files are
    written only inside the trees of `paths` (default: the files themselves), see writeback.py."""
    out = Fixed()
    remaining = out.remaining
    trees = writeback.trees_of(paths if paths is not None else files)
    for path in files:
        context = (contexts or {}).get(path)
        name = str(path)
        try:
            limit = settings.max_file_size
            data = (
                guard.read_regular(path, notebook.file_limit(limit), notebook.FILE_WHAT)
                if notebook.is_notebook(path)
                else guard.read_regular(path, limit)
            )
        except guard.Skip as exc:
            remaining.append(guard.not_linted(name, exc, guard.named_paths(paths)))
            continue
        except OSError as exc:
            remaining.append(parse_error(name, f"cannot read file: {exc.strerror or exc}; check its permissions", 1, 1))
            continue
        nb = None
        try:
            if notebook.is_notebook(path):  # fixed as its code cells' Python text, written back as JSON
                nb = notebook.Notebook.parse(data)
                code = len(nb.python.encode("utf-8"))
                if settings.max_file_size is not None and code > settings.max_file_size:  # as lint_files does
                    remaining.append(
                        guard.skipped(name, guard.too_large(code, settings.max_file_size, "of code cells"))
                    )
                    continue
            original, encoding, bom = (nb.python, "utf-8", False) if nb else decode(data)
        except (SourceError, notebook.NotebookError) as exc:
            remaining.append(parse_error(name, str(exc), 1, 1))
            continue
        located = nb.locate if nb else (lambda d: d)
        fixed, after = fix_text(original, name, settings, context)
        if fixed == original:
            remaining += map(located, after.remaining)
            continue
        if settings.diff:
            sys.stdout.writelines(_diff(original, fixed, name, nb))
            out.fixed += after.fixed
            out.edits += after.edits
            remaining += map(located, selected_before(original, name, settings, context))
            continue
        try:
            if nb and not nb.writable:
                raise writeback.Refused("its JSON layout is not one archlint can write back unchanged")
            new = nb.rebuild(fixed) if nb else encode(fixed, encoding, bom)
            writeback.replace(path, data, new, trees)
        except (writeback.Refused, notebook.NotebookError, OSError) as exc:  # its findings stay, the other files go on
            why = (
                f"cannot write the fixes ({exc.strerror or exc})"
                if isinstance(exc, OSError)
                else f"fixes not written: {exc}"
            )
            print(f"archlint: warning: {printable(f'{name}: {why}')}; left unchanged", file=sys.stderr)
            remaining += map(located, selected_before(original, name, settings, context))
            continue
        out.fixed += after.fixed  # counted once on disk
        out.edits += after.edits
        remaining += map(located, after.remaining)
    return out


def _diff(original: str, fixed: str, name: str, nb) -> list[str]:
    """A unified diff of the file; for a notebook, one per changed code cell (`name:cell N`)."""
    before, after = (text.split(notebook.BOUNDARY + "\n") for text in (original, fixed))
    if nb is None or len(before) != len(after):
        return list(difflib.unified_diff(lines_with_ends(original), lines_with_ends(fixed), name, name))
    out = []
    for index, old, new in zip(nb.code_cells, before, after):
        label = f"{name}:cell {index + 1}"
        old, new = ([nb.restored(line) + "\n" for line in text.split("\n")[:-1]] for text in (old, new))
        out += difflib.unified_diff(old, new, label, label)
    return out


def selected_before(
    text: str, path: str, settings: Settings, context: ProjectContext | None = None
) -> list[Diagnostic]:
    return selected(_lint(text, path, context), settings)
