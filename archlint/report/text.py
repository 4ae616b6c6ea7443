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
from archlint.diagnostics import Applicability, Diagnostic, Severity
from archlint.printable import printable
from archlint.registry import RuleInfo
from archlint.result import RunResult


def location(d: Diagnostic, settings: Settings | None = None) -> str:
    """`file:line:col`, relative to the project root when settings are given, then for model
    findings the module path in brackets ("[model]" for a finding about the whole model)."""
    if d.file:
        file = printable(settings.relpath(d.file) if settings else d.file)  # never raw bytes or escapes
        cell = [f"cell {d.cell}"] if d.cell is not None else []  # a notebook: `bad.ipynb:cell 3:5:1`, as ruff
        where = ":".join([file, *cell] + [str(v) for v in (d.line, d.column) if v is not None])
    else:
        where = d.target or "<model>"
    if d.node:
        where += f" [{d.module or ('model' if d.module == '' else d.node)}]"
    return where


def price_bits(d: Diagnostic) -> list[str]:
    """A finding's price in short phrases, the one phrasing every reporter uses:
    the saving and its share on its basis (said in words), the counts it saves, the alternative."""
    p = d.price
    if p is None:
        return []
    if p.saving_ms is not None:
        where = f" on {p.device}" if p.device else ""
        if p.noise_share is not None:  # measured, but the difference stayed inside the timing noise
            bits = [f"could not measure (noise {p.noise_share:.1%} of {p.whole}, {p.basis}{where})"]
        elif p.saving_ms > 0:
            bits = [f"saves ≈ {p.saving_ms:.3g} ms, {p.saving_share:.1%} of {p.whole} ({p.basis}{where})"]
        else:  # a measured what-if can come out at or below zero: said as it is
            bits = [f"alternative no faster ({p.saving_ms:+.3g} ms, {p.basis}{where})"]
    elif p.mac_bytes_saved:
        bits = [f"saves {human_bytes(p.mac_bytes_saved)} MAC, {p.saving_share:.1%} of model MAC (static)"]
    else:
        bits = ["no runtime saving counted (static)"]
    if p.saving_ms is not None and p.mac_bytes_saved:
        bits.append(f"{human_bytes(p.mac_bytes_saved)} MAC")
    if p.flops_saved:
        bits.append(f"{human_count(p.flops_saved)} FLOPs")
    if p.alternative:
        bits.append(f"vs {p.alternative}")
    return bits


def price_text(d: Diagnostic) -> str:
    """The price as one bracketed phrase ("" without a price), appended to messages."""
    bits = price_bits(d)
    return "  [" + "; ".join(bits) + "]" if bits else ""


def shown(diagnostics: Iterable[Diagnostic], settings: Settings) -> list[Diagnostic]:
    """The findings a reader sees: info findings (advice, code or model) only with --show-info."""
    return [d for d in diagnostics if settings.show_info or not d.hidden]


def safe_fix(d: Diagnostic) -> bool:
    """The finding has a fix that --fix applies without --unsafe-fixes."""
    return d.fix is not None and d.fix.applicability is Applicability.SAFE


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"


def human_count(n: float) -> str:
    for unit in ("", "K", "M", "G"):
        if abs(n) < 1000:
            return f"{n:.4g}{unit}"
        n /= 1000
    return f"{n:.4g}T"


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
    hidden_note = (f"{hidden} info finding{'s' if hidden != 1 else ''} hidden (advice, never fails the run; "
                   f"--show-info shows {'them' if hidden != 1 else 'it'})")
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


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _with_edits(result: RunResult) -> str:
    """" with 3 edits" when the fixes made more edits than findings fixed (AL301's fix pins the
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
    for r in rules:
        table.add_row(r.code, r.name, r.scope, r.severity.value, r.fix, r.summary)
    terminal().print(table)
