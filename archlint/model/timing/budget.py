"""The wall time `--latency` may spend timing one model (`--latency-budget SECONDS`).

On a busy machine every pass is slower and noisier; without a bound, the per-op pass, the
what-ifs and the pricing of fixes together took minutes. One Budget per model is opened when
timing starts; each stage times up to its own share of it (the per-op and end-to-end passes up to
TIMING_SHARE, the pricing of findings up to PRICING_SHARE, or to the end without what-ifs, the
what-ifs up to the end), so a
late stage is never starved by an early one. The what-ifs come last (torch.compile disturbs the
timing of whatever runs after it in the process). A stage cut short says so in the report's notes.
With --timeout, the budget is at most TIMEOUT_SHARE of it: timing that goes well ends by itself,
and only a model that hangs meets the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from archlint.config import Settings

TIMING_SHARE = 0.5
PRICING_SHARE = 0.75
TIMEOUT_SHARE = 0.8


def seconds(settings: Settings) -> float | None:
    """The budget for one model: --latency-budget, at most TIMEOUT_SHARE of --timeout."""
    limits = [settings.latency_budget, settings.timeout]
    if limits[1] is not None:
        limits[1] *= TIMEOUT_SHARE
    known = [v for v in limits if v is not None]
    return min(known) if known else None


class Budget:
    def __init__(
        self, seconds: float | None, clock: Callable[[], float] = time.monotonic, what_ifs: bool = False
    ) -> None:
        self.seconds, self.clock = seconds, clock
        self.pricing_share = PRICING_SHARE if what_ifs else 1.0  # the what-ifs, after pricing, get the rest
        self.start = clock()
        self.cuts: list[str] = []  # what was cut short, in words
        self.ahead: list[str] = []  # said before a stage: it will not fit (measure.forecast)

    def deadline(self, share: float = 1.0) -> float | None:
        """The clock reading by which a stage with this share of the budget must stop; None: no limit."""
        return None if self.seconds is None else self.start + share * self.seconds

    def spent(self, share: float = 1.0) -> bool:
        deadline = self.deadline(share)
        return deadline is not None and self.clock() >= deadline

    def cut(self, what: str) -> None:
        if what not in self.cuts:
            self.cuts.append(what)

    def said(self, what: str) -> None:
        self.ahead.append(what)

    def notes(self) -> list[str]:
        if not self.cuts:
            return list(self.ahead)
        return [
            *self.ahead,
            f"--latency-budget {self.seconds:g} s reached: {'; '.join(self.cuts)}; the figures rest on fewer "
            "passes (raise --latency-budget for more)",
        ]
