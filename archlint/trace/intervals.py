"""Interval arithmetic on (start, end) pairs in µs: pure functions, no trace knowledge."""

from __future__ import annotations

import bisect
from collections.abc import Iterable


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The disjoint, sorted union of the intervals (touching ones merge)."""
    merged: list[tuple[float, float]] = []
    ordered = sorted(intervals)
    if not ordered:
        return merged
    lo, hi = ordered[0]
    for start, end in ordered:  # tuples built once per merged interval: no second list of pairs
        if start <= hi:
            if end > hi:
                hi = end
        else:
            merged.append((lo, hi))
            lo, hi = start, end
    merged.append((lo, hi))
    del ordered
    return merged


def length(merged: Iterable[tuple[float, float]]) -> float:
    return sum(e - s for s, e in merged)


def clip(merged: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of a disjoint sorted union that lie inside [lo, hi]."""
    out = []
    for k in range(max(0, bisect.bisect_left(merged, (lo,)) - 1), len(merged)):  # the one before may reach in
        s, e = merged[k]
        if e <= lo:
            continue
        if s >= hi:
            break
        out.append((max(s, lo), min(e, hi)))
    return out


def gaps(merged: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The complement of a disjoint sorted union inside [lo, hi]."""
    out, at = [], lo
    for s, e in clip(merged, lo, hi):
        if s > at:
            out.append((at, s))
        at = max(at, e)
    if hi > at:
        out.append((at, hi))
    return out


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two disjoint sorted unions."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
