"""AL310: a Dataset's `__getitem__` decodes images on the CPU (PIL, cv2) in a file that uses CUDA."""

from __future__ import annotations

import libcst as cst

from archlint.code.checks import Finding
from archlint.code.facts import Facts

CODES = ("AL310",)
_DATASETS = (
    "torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset",
    "torchvision.datasets.VisionDataset", "torchvision.datasets.vision.VisionDataset",
)
_DECODERS = {
    "PIL.Image.open": "PIL.Image.open",
    "cv2.imread": "cv2.imread",
    "cv2.imdecode": "cv2.imdecode",
}


def _is_dataset(facts: Facts, scope) -> bool:
    """`scope` is a class scope whose bases name a Dataset class."""
    node = scope.node
    if not isinstance(node, cst.ClassDef):
        return False
    return any(facts.qname(base.value, scope.parent) in _DATASETS for base in node.bases)


def check(facts: Facts):
    if not facts.uses_cuda:
        return
    for site in facts.calls:
        scope = site.scope
        if scope.kind != "function" or scope.node.name.value != "__getitem__":
            continue
        if scope.parent is None or scope.parent.kind != "class" or not _is_dataset(facts, scope.parent):
            continue
        decoder = _DECODERS.get(facts.qname(site.node.func, scope) or "")
        if decoder is None:
            continue
        yield Finding(
            "AL310",
            site.node,
            f"{decoder} in __getitem__ decodes every image on the CPU, every epoch, in a CUDA training file: "
            "decode on the GPU (torchvision.io.decode_jpeg(data, device='cuda') on a batch of "
            "torchvision.io.read_file bytes) or with DALI; `archlint loader FILE:CLASS` measures decode's share",
        )
