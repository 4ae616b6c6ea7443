"""AL415: DistributedDataParallel without gradient_as_bucket_view=True.

By default DDP keeps each gradient in `param.grad` and copies it into its all-reduce bucket and
back: a second copy of every gradient lives for the whole step, and each step copies them twice.
`gradient_as_bucket_view=True` makes the gradients views of the buckets (PyTorch's DDP docs: the
saved memory equals the total gradient size). Info: the default is False and code that calls
`detach_()` or `requires_grad_()` on a gradient breaks with views."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._distributed import ddp_calls, flag
from archlint.code.checks._edits import add_keyword, replace
from archlint.code.facts import Facts
from archlint.diagnostics import Applicability, Fix, Severity

CODES = ("AL415",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "unsafe"
MESSAGE = (
    "DDP keeps a second copy of every gradient in its all-reduce buckets and copies between the "
    "two on every step: gradient_as_bucket_view=True makes the gradients views of the buckets, "
    "saving memory the size of all gradients"
)


def check(facts: Facts):
    for site in ddp_calls(facts):
        value = flag(site, "gradient_as_bucket_view")
        if value is df.MISSING:
            yield Finding(
                "AL415",
                site.node,
                MESSAGE,
                lambda site=site: Fix(
                    "Add gradient_as_bucket_view=True",
                    Applicability.UNSAFE,
                    (add_keyword(facts, site.node, "gradient_as_bucket_view=True"),),
                ),
            )
        elif value is False:
            node = df.argument(site, "gradient_as_bucket_view")
            direct = any(a.keyword is not None and a.value is node for a in site.node.args)
            yield Finding(
                "AL415",
                site.node,
                MESSAGE,
                (
                    lambda node=node: Fix(
                        "Use gradient_as_bucket_view=True", Applicability.UNSAFE, (replace(facts, node, "True"),)
                    )
                )
                if direct
                else None,
            )
