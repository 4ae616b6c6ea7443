"""Numbers in words, the one wording every output uses: bytes in decimal units (KB = 1000 B, as
the MAC of ShuffleNetV2's tables) and counts with K/M/G/T suffixes."""

from __future__ import annotations


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


def times(x: float) -> str:
    """A speed-up as "1.23×"; below 0.1× in two significant digits ("0.0047×"), never "0.00×"."""
    return f"{x:.2f}×" if x >= 0.1 or x <= 0 else f"{x:.2g}×"
