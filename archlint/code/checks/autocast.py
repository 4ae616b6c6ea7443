"""AL403: a CUDA training loop that never uses automatic mixed precision."""

from __future__ import annotations

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import Facts

CODES = ("AL403",)
# Anything that shows the file already chose a precision: autocast, a scaler, half/bf16 models,
# or a framework that configures precision itself.
_PRECISION_SIGNS = {"autocast", "GradScaler", "bfloat16", "float16", "half"}
_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "deepspeed", "apex")


def check(facts: Facts):
    if not facts.uses_cuda or facts.idents & _PRECISION_SIGNS:
        return
    if any(facts.imports.uses(f) for f in _FRAMEWORKS):
        return
    loops = df.batch_loops(facts)
    batch_loop_ids = {id(other.loop) for other in loops}  # a set: linear in the loops, not quadratic
    for bl in loops:
        if bl.is_training and id(bl.loop.parent) not in batch_loop_ids:
            yield Finding(
                "AL403",
                bl.loop.node,
                "CUDA training loop runs in float32: wrap the forward pass and loss in "
                'torch.autocast("cuda", dtype=torch.bfloat16) to use tensor cores (often 2-3x faster)',
            )
