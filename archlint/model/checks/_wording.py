"""How the model rules' messages say numbers."""

from __future__ import annotations


def binary_bytes(n: float) -> str:
    """Bytes in binary units ("1.5 KiB", 1 KiB = 1024 B), as the model rules' messages have always
    said them (the reports' archlint.units.human_bytes says decimal KB: changing one would change
    the findings' text)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
