"""Paired timings judged as they come: is B faster than A, slower, or can this machine not tell?

A saving is the median of the paired per-pass differences (A and B run in alternating order, so
drift in the machine's speed hits both alike). Its error is a median's, ≈ 1.25·σ/√n with σ from
the interquartile range (IQR/1.349); the noise is twice that. Pairs come in batches, and after
each batch `judge` says whether more are worth their time (a sequential rule):

- the difference exceeds INTERIM × its error: measured; stop (the stricter bound at interim looks
  keeps repeated looking from turning noise into savings);
- the whole interval |median| + noise is under the materiality floor: whatever the saving is, it
  cannot pay; stop;
- the pairs reached their cap (or the time budget ran out): stop, and the difference counts only
  beyond twice its error.

A difference inside the noise is no measured saving: `WithinNoise` (0 ms that carries how wide
the noise was, so the report says "could not measure (noise N%)" instead of "no faster").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_PAIRS = 8  # a median and an IQR of fewer pairs say little
INTERIM = 3.0  # errors a difference must exceed to stop early as measured
FINAL = 2.0  # ... and at the last look


class WithinNoise(float):
    """A measured saving of 0: the difference stayed inside the noise, whose half-width (`noise`,
    twice the median's error, in the saving's own unit) says how large a saving this machine could
    have told apart from none."""

    noise: float

    def __new__(cls, noise: float) -> WithinNoise:
        value = super().__new__(cls, 0.0)
        value.noise = float(noise)
        return value

    def __repr__(self) -> str:
        return f"WithinNoise(noise={self.noise!r})"


@dataclass(frozen=True)
class Verdict:
    done: bool  # no more pairs needed
    saving_ms: float  # the median difference, or WithinNoise when it is inside the noise
    pairs: int
    why: str  # "measured", "below floor", "cap", "undecided"


def error_ms(diffs: Sequence[float]) -> float:
    """The standard error of the median of `diffs`, from their interquartile range."""
    q1, _, q3 = statistics.quantiles(diffs, n=4, method="inclusive")
    return 1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(diffs))


def judge(
    before: Sequence[float], after: Sequence[float], floor_ms: float, max_pairs: int, last: bool = False
) -> Verdict:
    """The verdict on the pairs so far (before[i] paired with after[i]); `last`: no more will
    come (the time budget ran out), so decide now."""
    diffs = [b - a for b, a in zip(before, after)]
    n = len(diffs)
    final = last or n >= max_pairs
    if n < 4:  # too few for quartiles (a --repeat under 4): the range is all the noise there is
        spread = max(diffs) - min(diffs) if diffs else 0.0
        return Verdict(final, WithinNoise(spread), n, "cap" if final else "undecided")
    median, error = statistics.median(diffs), error_ms(diffs)
    measured = abs(median) > FINAL * error
    if n >= MIN_PAIRS or final:
        if abs(median) > (FINAL if final else INTERIM) * error:
            return Verdict(True, median, n, "cap" if final else "measured")
        if abs(median) + FINAL * error < floor_ms:
            return Verdict(True, median if measured else WithinNoise(FINAL * error), n, "below floor")
    if final:
        return Verdict(True, WithinNoise(FINAL * error), n, "cap")
    return Verdict(False, WithinNoise(FINAL * error), n, "undecided")
