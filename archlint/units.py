"""Numbers in words, the one wording every output uses: bytes in decimal units (KB = 1000 B, as
the MAC of ShuffleNetV2's tables) and counts with K/M/G/T suffixes."""

from __future__ import annotations

import math


def significant(x: float, digits: int = 3, *, fixed: bool = False) -> str:
    """`x` to `digits` significant digits, never in scientific notation: 636, 6.36, 0.00123,
    12,934 (a whole number above 10**digits keeps its digits: "1.29e+04 ms" read as a typo).
    `fixed`: one format for every row of a column (what-if's base/new ms): trailing zeros kept and
    whole numbers without a separator ("0.0781", "12.0", "636", "2280"), at most 9 decimals."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    if fixed:
        places = min(9, max(0, digits - 1 - math.floor(math.log10(abs(x)))))
        text = f"{x:.{places}f}"
        if places and abs(float(text)) >= 10 ** (digits - places):  # rounded up a digit (99.96 → 100.0): one less
            text = f"{x:.{places - 1}f}"
        return text
    text = f"{x:.{digits}g}"
    if "e" not in text:
        return text
    exponent = math.floor(math.log10(abs(x)))
    if exponent >= digits - 1:
        return f"{x:,.0f}"
    return f"{x:.{max(0, digits - 1 - exponent)}f}"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{significant(n)} {unit}"
        n /= 1000
    return f"{significant(n)} TB"


def human_count(n: float) -> str:
    for unit in ("", "K", "M", "G"):
        if abs(n) < 1000:
            return f"{significant(n, 4)}{unit}"
        n /= 1000
    return f"{significant(n, 4)}T"


def times(x: float) -> str:
    """A speed-up as "1.23×"; below 0.1× in two significant digits ("0.0047×"), never "0.00×"."""
    return f"{x:.2f}×" if x >= 0.1 or x <= 0 else f"{x:.2g}×"


def bytes_against(n: float, limit: float) -> tuple[str, str]:
    """`n` and `limit` in one decimal unit, with the digits that tell them apart: "25.83 GB" against
    "25.77 GB", never "25.8 GB" against "25.8 GB" (at least three significant digits). Rounding both
    alike keeps their order, so a figure within a limit never prints above it, nor one over it at
    or under it."""
    scale, unit = 1, "B"
    for name in ("KB", "MB", "GB", "TB"):
        if max(abs(n), abs(limit)) < scale * 1000:
            break
        scale, unit = scale * 1000, name
    top = max(abs(n), abs(limit)) / scale
    digits = 0 if unit == "B" else 0 if top >= 100 else 1 if top >= 10 else 2
    while True:
        a, b = f"{n / scale:.{digits}f}", f"{limit / scale:.{digits}f}"
        if a != b or n == limit or unit == "B" or digits >= 9:
            return f"{a} {unit}", f"{b} {unit}"
        digits += 1


def duration(seconds: float) -> str:
    """A wall time in words: "40 s", "5 min 42 s"."""
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60} s"
