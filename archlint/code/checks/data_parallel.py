"""AL406: nn.DataParallel."""

from __future__ import annotations

from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL406",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"


def check(facts: Facts):
    for site in facts.calls_to("torch.nn.DataParallel"):
        yield Finding(
            "AL406",
            site.node,
            "nn.DataParallel re-scatters the model from one process every step (GIL-bound, GPU 0 "
            "overloaded): use DistributedDataParallel with one process per GPU",
        )
