"""AL405: a checkpoint written on every iteration of the batch loop."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL405",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"


def check(facts: Facts):
    saves = facts.calls_to("torch.save")
    if not saves:
        return
    for bl in df.batch_loops(facts):
        if not bl.is_training:
            continue
        for site in saves:
            where = df.in_loop(site, bl.loop)
            if where is not None and not where.conditional:
                yield Finding(
                    "AL405",
                    site.node,
                    "torch.save runs on every training step: serializing the state stalls the loop; "
                    "save every N steps (under an if) or once per epoch",
                )
