"""AL412: SyncBatchNorm when each GPU's batch is large enough for BatchNorm on its own.

SyncBatchNorm runs two blocking collectives per BatchNorm layer per training step (an all-gather
of each layer's mean, inverse std and count in the forward, an all-reduce of two per-channel sums
in the backward: torch/nn/modules/_functions.py), which nothing overlaps. It pays when the
per-GPU batch is too small for stable statistics (detection and segmentation: 2-8 images); the
Group Normalization paper (Wu & He, 2018, Figure 1) measures BatchNorm's ImageNet error flat from
32 down to 16 images per GPU. Reported only where the training loader's batch_size is a literal
of at least 32 (under DDP a DataLoader's batch is per process)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.checks import Finding
from archlint.code.facts import CallSite, Facts
from archlint.diagnostics import Severity

CODES = ("AL412",)
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
CONVERT = (
    "torch.nn.SyncBatchNorm.convert_sync_batchnorm",
    "torch.nn.modules.batchnorm.SyncBatchNorm.convert_sync_batchnorm",
)
MIN_BATCH = 32  # per GPU: BatchNorm's error is flat from here down to 16 (Wu & He 2018, Fig. 1)


def _batch_size(loader: CallSite) -> tuple[int, cst.CSTNode] | None:
    """The DataLoader's batch_size as an int literal (or a name assigned one literal), with its node."""
    value = df.argument(loader, "batch_size", 1)
    if isinstance(value, cst.Name):
        found = loader.scope.lookup(value.value)
        if found is None or len(found.values) != 1 or found.values[0] is None:
            return None
        value = found.values[0]
    size = df.literal(value) if isinstance(value, cst.BaseExpression) else df.UNKNOWN
    return (size, value) if isinstance(size, int) and not isinstance(size, bool) else None


def check(facts: Facts):
    converts = facts.calls_to(*CONVERT)
    if not converts:
        return
    sizes = []
    for bl in df.training_loops(facts):
        if isinstance(bl.source, CallSite):
            sizes.append(_batch_size(bl.source))
    if not sizes or any(s is None for s in sizes):
        return  # a training loader whose batch this file cannot read
    smallest, node = min(sizes, key=lambda s: s[0])
    if smallest < MIN_BATCH:
        return
    line = facts.position(node).start.line
    for site in converts:
        yield Finding(
            "AL412",
            site.node,
            f"SyncBatchNorm with {smallest} samples per GPU (batch_size at line {line}): it runs two blocking "
            "collectives per BatchNorm layer per step (an all-gather of its statistics in the forward, an "
            "all-reduce in the backward), which pay only when a GPU's batch is too small for BatchNorm's "
            f"own statistics; at {MIN_BATCH} or more per GPU plain BatchNorm keeps its accuracy: drop the "
            "conversion",
        )
