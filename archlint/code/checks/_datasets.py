"""Dataset classes, shared by the checks about what a Dataset does per item (AL310, AL312)."""

from __future__ import annotations

import libcst as cst

from archlint.code.facts import Facts

DATASETS = (
    "torch.utils.data.Dataset",
    "torch.utils.data.dataset.Dataset",
    "torchvision.datasets.VisionDataset",
    "torchvision.datasets.vision.VisionDataset",
)


def is_dataset(facts: Facts, scope) -> bool:
    """`scope` is a class scope whose bases name a Dataset class."""
    node = scope.node
    if not isinstance(node, cst.ClassDef):
        return False
    return any(facts.qname(base.value, scope.parent) in DATASETS for base in node.bases)
