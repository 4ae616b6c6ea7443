"""AL410: find_unused_parameters=True on DistributedDataParallel (or the same flag handed to DDP by
Lightning, accelerate or the Hugging Face Trainer).

Info on its own: the flag is right for a model whose forward leaves some parameters without a
gradient. With the model analyzed in the same run (`archlint train.py model.py:Net`), the finding
is checked against the captured forward (model/links.py: `link_distributed`): every
parameter read makes it a warning, an unused one says the flag is needed."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.checks._distributed import DDP, flag
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL410",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
# Calls that hand `find_unused_parameters` (or their own spelling of it) to DDP.
_PASSERS = {
    DDP: "find_unused_parameters",
    "lightning.pytorch.strategies.DDPStrategy": "find_unused_parameters",
    "pytorch_lightning.strategies.DDPStrategy": "find_unused_parameters",
    "lightning.fabric.strategies.DDPStrategy": "find_unused_parameters",
    "accelerate.DistributedDataParallelKwargs": "find_unused_parameters",
    "accelerate.utils.DistributedDataParallelKwargs": "find_unused_parameters",
    "transformers.TrainingArguments": "ddp_find_unused_parameters",
    "transformers.Seq2SeqTrainingArguments": "ddp_find_unused_parameters",
}
# Lightning's registered strategy names that turn the flag on
_STRATEGIES = ("ddp_find_unused_parameters_true", "ddp_spawn_find_unused_parameters_true")
_TRAINERS = (
    "lightning.pytorch.Trainer",
    "pytorch_lightning.Trainer",
    "lightning.Trainer",
    "lightning.fabric.Fabric",
    "lightning.Fabric",
)

MESSAGE = (
    "find_unused_parameters=True makes DDP walk the autograd graph from the forward's outputs on "
    "every step to find parameters that will get no gradient; it is needed only when some do (a "
    "branch or head not run every step): if the same ones go unused on every step, "
    "static_graph=True finds them once instead; if none do, drop the flag"
)


# The Hugging Face Trainer turns the flag on itself when it is not given, for a PreTrainedModel
# without activation checkpointing (transformers' Trainer: `find_unused = not (...checkpointing)`).
_HF_ARGS = ("transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments")
HF_DEFAULT = (
    "when run on several GPUs, the Hugging Face Trainer passes find_unused_parameters=True to DDP unless "
    "told otherwise (for a PreTrainedModel without gradient checkpointing): DDP then walks the autograd "
    "graph on every step; pass ddp_find_unused_parameters=False if every parameter gets a gradient"
)


def _checkpoints_model(facts: Facts) -> bool:
    """`model.gradient_checkpointing_enable()` somewhere in the file: the Trainer leaves the flag off."""
    return any(
        isinstance(s.node.func, cst.Attribute) and s.node.func.attr.value == "gradient_checkpointing_enable"
        for s in facts.calls
    )


def check(facts: Facts):
    for site in facts.calls_to(*_PASSERS, *_TRAINERS):  # one pass over the file's calls
        name = facts.qname(site.node.func, site.scope)
        keyword = _PASSERS.get(name)
        if (
            name in _HF_ARGS
            and flag(site, keyword) is df.MISSING
            and flag(site, "gradient_checkpointing") in (df.MISSING, False)
            and not _checkpoints_model(facts)
        ):
            yield Finding("AL410", site.node, HF_DEFAULT)
        elif keyword is not None:
            # with static_graph=True DDP skips the walk after the first step: the flag costs nothing
            if flag(site, keyword) is True and flag(site, "static_graph") is not True:
                yield Finding("AL410", site.node, MESSAGE)
        elif flag(site, "strategy") in _STRATEGIES:
            yield Finding(
                "AL410",
                site.node,
                MESSAGE.replace("find_unused_parameters=True", f"the strategy {flag(site, 'strategy')!r}", 1),
            )
