"""Numbers in words, the one wording every output uses: bytes in decimal units (KB = 1000 B, as
the MAC of ShuffleNetV2's tables) and counts with K/M/G/T suffixes."""

from __future__ import annotations

import math


def significant(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, never in scientific notation: 636, 6.36, 0.00123,
    12,934 (a whole number above 10**digits keeps its digits: "1.29e+04 ms" read as a typo)."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
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
