"""AL407: zero_grad(set_to_none=False)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._edits import replace
from archlint.code.facts import Facts
from archlint.diagnostics import Applicability, Fix, Severity

CODES = ("AL407",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "unsafe"


def check(facts: Facts):
    if "torch" not in facts.imports.names.values() and not facts.imports.uses("torch"):
        return
    for site in facts.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "zero_grad":
            continue
        value = df.argument(site, "set_to_none", 0)
        if value in (df.MISSING, df.UNKNOWN) or df.literal(value) is not False:
            continue
        yield Finding(
            "AL407",
            site.node,
            "zero_grad(set_to_none=False) writes zeros into every gradient each step: drop the argument "
            "(set_to_none=True is the default) so backward allocates them instead",
            lambda value=value: Fix("Use set_to_none=True", Applicability.UNSAFE, (replace(facts, value, "True"),)),
        )
