"""AL310: a Dataset's `__getitem__` decodes images on the CPU (PIL, cv2) in a file that uses CUDA."""

from __future__ import annotations

from archlint.code.checks import Finding
from archlint.code.checks._datasets import is_dataset
from archlint.code.facts import Facts
from archlint.diagnostics import Severity

CODES = ("AL310",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
_DECODERS = {
    "PIL.Image.open": "PIL.Image.open",
    "cv2.imread": "cv2.imread",
    "cv2.imdecode": "cv2.imdecode",
}


def check(facts: Facts):
    if not facts.uses_cuda:
        return
    for site in facts.calls:
        scope = site.scope
        if scope.kind != "function" or scope.node.name.value != "__getitem__":
            continue
        if scope.parent is None or scope.parent.kind != "class" or not is_dataset(facts, scope.parent):
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
