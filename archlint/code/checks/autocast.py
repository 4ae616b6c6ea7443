"""AL403: a CUDA training loop that never uses automatic mixed precision."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts

CODES = ("AL403",)
PRICED_BY_WHAT_IF = ("bf16", "fp16")  # its fix is autocast: the analyzed model's 16-bit what-if prices it (speedups.links)
# Anything that shows the file already chose a precision: autocast, a scaler, half/bf16 models,
# or a framework that configures precision itself.
_PRECISION_SIGNS = {"autocast", "GradScaler", "bfloat16", "float16", "half"}
# apex counts only for its precision modules: `apex.parallel.LARC` or `apex.optimizers` choose nothing.
_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "deepspeed", "apex.amp", "apex.fp16_utils")


def check(facts: Facts):
    if not facts.uses_cuda or facts.idents & _PRECISION_SIGNS:
        return
    if any(facts.imports.uses(f) for f in _FRAMEWORKS) or _apex_amp(facts) or _imported_precision(facts):
        return
    batch = {id(other.loop) for other in df.batch_loops(facts)}
    for bl in df.training_loops(facts):
        if id(bl.loop.parent) not in batch and not _step_helper_chooses(bl, facts) and not (
                facts.project.amp and not bl.loop.has_backward):  # the step is elsewhere, near a precision choice
            yield Finding(
                "AL403",
                bl.loop.node,
                "CUDA training loop runs in float32: wrap the forward pass and loss in "
                'torch.autocast("cuda", dtype=torch.bfloat16) to use tensor cores (often 2-3x faster)',
            )


def _apex_amp(facts: Facts) -> bool:
    """`import apex` then `apex.amp.initialize(...)`."""
    return any((facts.qname(site.node.func, site.scope) or "").startswith(("apex.amp.", "apex.fp16_utils."))
               for site in facts.calls)


def _imported_precision(facts: Facts) -> bool:
    """A project or library helper named for it: `from utils import NativeScaler, get_autocast_ctx`."""
    return any(word in local.lower() for local in facts.imports.names for word in ("autocast", "scaler", "amp_"))


def _step_helper_chooses(bl, facts: Facts) -> bool:
    """The backward runs in a project function whose module chooses a precision."""
    return any(facts.project.name(df.dotted(site.node.func)).get("amp") for site in bl.loop.calls)
