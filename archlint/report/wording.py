"""A finding in words, the one phrasing every reporter uses: where it is, what it would save on
which basis, whether a reader sees it, whether --fix fixes it."""

from __future__ import annotations

from collections.abc import Iterable

from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic
from archlint.printable import printable
from archlint.units import human_bytes, human_count, significant


def location(d: Diagnostic, settings: Settings | None = None) -> str:
    """`file:line:col`, relative to the project root when settings are given, then for model
    findings the module path in brackets ("[model]" for a finding about the whole model)."""
    if d.file:
        file = printable(settings.relpath(d.file) if settings else d.file)  # never raw bytes or escapes
        cell = [f"cell {d.cell}"] if d.cell is not None else []  # a notebook: `bad.ipynb:cell 3:5:1`, as ruff
        where = ":".join([file, *cell] + [str(v) for v in (d.line, d.column) if v is not None])
    else:
        where = printable(d.target) if d.target else "<model>"
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
            bits = [f"saves ≈ {significant(p.saving_ms)} ms, {p.saving_share:.1%} of {p.whole} ({p.basis}{where})"]
        else:  # a measured what-if can come out at or below zero: said as it is
            bits = [
                f"alternative no faster ({'+' if p.saving_ms >= 0 else '-'}{significant(abs(p.saving_ms))} ms, {p.basis}{where})"
            ]
    elif p.mac_bytes_saved:
        whole = "model MAC" if p.whole == "model time" else p.whole  # a step's MAC (AL611)
        bits = [f"saves {human_bytes(p.mac_bytes_saved)} MAC, {p.saving_share:.1%} of {whole} (static)"]
    elif p.saving_share and p.whole != "model time":  # a saving of another whole: a step's peak memory
        bits = [f"saves {p.saving_share:.1%} of {p.whole} (static)"]
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


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
