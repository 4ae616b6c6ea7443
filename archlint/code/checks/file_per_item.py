"""AL312: a Dataset lists a directory and opens one file per item in `__getitem__`."""

from __future__ import annotations

import libcst as cst

from archlint.code.checks import Finding
from archlint.code.checks._datasets import is_dataset
from archlint.code.facts import Facts
from archlint.code.names import dotted
from archlint.diagnostics import Severity

CODES = ("AL312",)
SEVERITY = Severity.INFO  # as its page says (archlint.declarations checks)
PRICE = ()
FIX = "none"
_LISTINGS = ("os.listdir", "os.scandir", "os.walk", "glob.glob", "glob.iglob")
_LISTING_METHODS = ("glob", "rglob", "iterdir")  # pathlib.Path methods
_OPENERS = (
    "PIL.Image.open",
    "cv2.imread",
    "numpy.load",
    "numpy.fromfile",
    "torch.load",
    "torchvision.io.read_image",
    "torchvision.io.read_file",
    "torchvision.io.decode_image",
    "imageio.imread",
    "imageio.v3.imread",
    "skimage.io.imread",
    "soundfile.read",
    "torchaudio.load",
)


def _lists_directory(facts: Facts, site) -> bool:
    name = facts.qname(site.node.func, site.scope)
    if name in _LISTINGS:
        return True
    func = site.node.func
    return isinstance(func, cst.Attribute) and func.attr.value in _LISTING_METHODS and name is None


def _opens_file(facts: Facts, site) -> str | None:
    name = facts.qname(site.node.func, site.scope)
    if name in _OPENERS:
        return name
    if dotted(site.node.func) == "open" and not site.scope.binds("open"):
        return "open"
    func = site.node.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("open", "read_bytes", "read_text") and name is None:
        return f".{func.attr.value}()"  # pathlib: path.open(), path.read_bytes()
    return None


def check(facts: Facts):
    by_class: dict[int, dict] = {}
    for site in facts.calls:
        method = site.scope
        if method.kind != "function" or method.parent is None or method.parent.kind != "class":
            continue
        cls = method.parent
        entry = by_class.setdefault(id(cls), {"cls": cls, "lists": False, "opens": []})
        if _lists_directory(facts, site):
            entry["lists"] = True
        elif method.node.name.value == "__getitem__":
            opener = _opens_file(facts, site)
            if opener is not None:
                entry["opens"].append((site, opener))
    for entry in by_class.values():
        if entry["lists"] and entry["opens"] and is_dataset(facts, entry["cls"]):
            site, opener = entry["opens"][0]
            yield Finding(
                "AL312",
                site.node,
                f"one file per item: the Dataset lists a directory and {opener} opens a file in every "
                "__getitem__; many small files cost an open and a read each (slow on network storage): "
                "pack them into a record format (LMDB, HDF5, WebDataset shards); `archlint loader` measures "
                "files and bytes per sample",
            )
