"""--output-format text: findings ruff-style (`file:line:col: CODE message`), then per model a
rich summary and the costliest layers."""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archlint.config import Settings
from archlint.diagnostics import Diagnostic, Severity
from archlint.printable import printable
from archlint.registry import RuleInfo
from archlint.report.wording import location, plural, price_text, safe_fix, shown
from archlint.result import RunResult


def terminal() -> Console:
    console = Console(highlight=False, soft_wrap=True, emoji=False)  # no :100: → 💯 in file:line:col
    if not console.is_terminal:  # CI logs and pipes: don't fold tables at 80 columns
        console.width = 160
    return console


def print_text(result: RunResult, settings: Settings, console: Console | None = None) -> None:
    console = console or terminal()
    for model in result.models:
        from archlint.report.model_table import print_model

        print_model(model, settings, console)
    for loader in result.loaders:
        from archlint.report.loader_table import print_loader

        print_loader(loader, console)
    for trace in result.traces:
        from archlint.report.trace_table import print_trace

        print_trace(trace, console)
    for job in result.ranks:
        from archlint.report.trace_table import print_ranks

        print_ranks(job, console)
    diagnostics = sorted(shown(result.diagnostics, settings), key=Diagnostic.sort_key)
    hidden = len(result.diagnostics) - len(diagnostics)
    if settings.diff and result.fixed is not None:  # the diff is the output; the count goes to stderr
        print(f"Would fix {plural(result.fixed, 'finding')}{_with_edits(result)}.", file=sys.stderr)
        return
    if settings.statistics and diagnostics:  # the counts only, no finding list on top
        for code, count in sorted(Counter(d.code for d in diagnostics).items()):
            fixable = " [*]" if any(safe_fix(d) for d in diagnostics if d.code == code) else ""
            console.print(f"{count:>5}  {code}{escape(fixable)}", markup=True)
        return
    for d in diagnostics:
        fixable = " [*]" if safe_fix(d) else ""  # as ruff: [*] is what plain --fix would do
        tag = " (info)" if d.severity is Severity.INFO else ""
        # Escaped: module paths, prices and messages hold "[...]" that rich would read as markup.
        console.print(
            f"{escape(location(d, settings))}: [bold red]{d.code}[/]{tag}{escape(fixable)} "
            f"{escape(printable(d.message))}{escape(price_text(d))}",
            markup=True,
        )
    for g in result.gate:
        if not g.passed:
            console.print(f"[bold red]gate failed[/] {escape(f'{g.target}: {g.check}: {g.message}')}")
        elif g.check in ("baseline:known-findings", "baseline:saved"):  # say what the baseline hid
            console.print(f"[dim]{escape(g.check.split(':')[0] + ': ' + g.message)}[/]")
    hidden_note = (
        f"{hidden} info finding{'s' if hidden != 1 else ''} hidden (advice, never fails the run; "
        f"--show-info shows {'them' if hidden != 1 else 'it'})"
    )
    fixed = settings.fix and result.fixed is not None
    summary_line = bool(result.files_checked or not (result.models or result.loaders)) and not fixed
    if hidden and not summary_line:  # otherwise the summary line says it
        console.print(f"[dim]{hidden_note}[/]")
    if settings.fix and result.fixed is not None:  # as ruff: what --fix did, then what is left
        unsafe = sum(1 for d in diagnostics if d.fix and d.fix.applicability.value != "safe")  # safe ones left:
        if unsafe and not settings.unsafe_fixes:  # their files could not be written, as a warning said
            console.print(f"{unsafe} more fixable with --fix --unsafe-fixes.")
        n = len(diagnostics)
        console.print(f"Fixed {plural(result.fixed, 'finding')}{_with_edits(result)} ({n} remaining).")
        return
    if result.files_checked or not (result.models or result.loaders):
        n = len(diagnostics)
        fixable = sum(1 for d in diagnostics if safe_fix(d))
        unsafe = sum(1 for d in diagnostics if d.fix) - fixable
        tail = f" ({fixable} fixable with --fix)" if fixable else ""
        if unsafe:  # like ruff: say how many more the flag would fix
            tail += f" ({unsafe} more with --fix --unsafe-fixes)"
        line = f"Found {n} finding{'s' if n != 1 else ''}{tail}" if n else "All checks passed"
        console.print(escape(f"{line}; {hidden_note}." if hidden else f"{line}."))


def _with_edits(result: RunResult) -> str:
    """ " with 3 edits" when the fixes made more edits than findings fixed (AL301's fix pins the
    loader and marks its copies non_blocking: one finding, three edits)."""
    edits = result.fixed_edits
    return f" with {plural(edits, 'edit')}" if edits is not None and edits != result.fixed else ""


def render(result: RunResult, settings: Settings) -> str:
    buf = io.StringIO()
    print_text(result, settings, Console(file=buf, width=120, highlight=False, soft_wrap=True, emoji=False))
    return buf.getvalue()


def print_rules(rules: Iterable[RuleInfo]) -> None:
    table = Table(title="archlint rules")
    for column in ("code", "name", "scope", "severity", "fix", "summary"):
        table.add_column(column)
    for r in rules:  # escaped: a summary's `[mask]` is text, not rich markup
        table.add_row(*(escape(v) for v in (r.code, r.name, r.scope, r.severity.value, r.fix, r.summary)))
    terminal().print(table)


def rules_json(rules: Iterable[RuleInfo]) -> str:
    """`archlint rules --output-format json`: one object per rule, the catalog's columns."""
    import json

    rows = [
        {
            "code": r.code,
            "name": r.name,
            "scope": r.scope,
            "severity": r.severity.value,
            "fix": r.fix,
            "summary": r.summary,
        }
        for r in rules
    ]
    return json.dumps({"rules": rows}, indent=2, ensure_ascii=False) + "\n"
