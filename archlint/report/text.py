"""--output-format text: findings ruff-style (`file:line:col: CODE message`), then per model a
rich summary and the costliest layers."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archlint.config import Settings
from archlint.diagnostics import Diagnostic
from archlint.registry import RuleInfo
from archlint.result import RunResult


def location(d: Diagnostic, settings: Settings | None = None) -> str:
    """`file:line:col`, relative to the project root when settings are given, then for model
    findings the module path in brackets ("[model]" for a finding about the whole model)."""
    if d.file:
        file = settings.relpath(d.file) if settings else d.file
        where = ":".join([file] + [str(v) for v in (d.line, d.column) if v is not None])
    else:
        where = d.target or "<model>"
    if d.node:
        where += f" [{d.module or ('model' if d.module == '' else d.node)}]"
    return where


def price_bits(d: Diagnostic) -> list[str]:
    """A finding's price in short phrases, measured figures first; shared by the reporters."""
    p = d.price
    if p is None:
        return []
    bits = []
    if p.latency_ms is not None:
        share = f" ({p.latency_share:.1%})" if p.latency_share is not None else ""
        bits.append(f"costs ≈ {p.latency_ms:.3g} ms{share} on {p.device or 'the device'}")
    if p.whatif_ms is not None:
        # A measured what-if can come out at or below zero (noise, or an alternative no faster).
        saving = f"fix saves ≈ {p.whatif_ms:.3g} ms" if p.whatif_ms > 0 else "the alternative measured no faster"
        bits.append(saving)
    if p.mac_bytes:
        share = f" ({p.mac_share:.1%} of MAC)" if p.mac_share is not None else ""
        bits.append(f"+{human_bytes(p.mac_bytes)} MAC{share}")
    if p.flops:
        bits.append(f"+{human_count(p.flops)} FLOPs")
    return bits


def _price(d: Diagnostic) -> str:
    bits = price_bits(d)
    return "  [" + "; ".join(bits) + "]" if bits else ""


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
    diagnostics = sorted(result.diagnostics, key=Diagnostic.sort_key)
    for d in diagnostics:
        fixable = " [*]" if d.fix else ""
        # Escaped: module paths, prices and messages hold "[...]" that rich would read as markup.
        console.print(
            f"{escape(location(d, settings))}: [bold red]{d.code}[/]{escape(fixable)} {escape(d.message)}{escape(_price(d))}",
            markup=True,
        )
    for g in result.gate:
        if not g.passed:
            console.print(f"[bold red]gate failed[/] {escape(f'{g.target}: {g.check}: {g.message}')}")
        elif g.check in ("baseline:known-findings", "baseline:saved"):  # say what the baseline hid
            console.print(f"[dim]{escape(g.check.split(':')[0] + ': ' + g.message)}[/]")
    if settings.statistics and diagnostics:
        for code, count in sorted(Counter(d.code for d in diagnostics).items()):
            console.print(f"{count:>5}  {code}")
    if result.files_checked or not result.models:
        n = len(diagnostics)
        fixable = sum(1 for d in diagnostics if d.fix and d.fix.applicability.value == "safe")
        unsafe = sum(1 for d in diagnostics if d.fix) - fixable
        tail = f" ({fixable} fixable with --fix)" if fixable else ""
        if unsafe:  # like ruff: say how many more the flag would fix
            tail += f" ({unsafe} more with --fix --unsafe-fixes)"
        console.print(
            f"Found {n} finding{'s' if n != 1 else ''}{tail}." if n else "All checks passed."
        )


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
