"""Qualified names from the file's own imports: `DL` → `torch.utils.data.DataLoader`.

libcst's QualifiedNameProvider does this for every node of the file and costs about 8× the parse
(conventions.md). The checks only ever ask about a handful of call sites, so this table is built
once from the import statements and answers those questions directly. Where the provider would
resolve a name through scopes, this table is conservative instead: a name that the file also binds
by assignment, `def`, `class`, a parameter or a loop is dropped, so a shadowed import is never
mistaken for the torch one (a missed finding, never a false one).
"""

from __future__ import annotations

from typing import cast

import libcst as cst

# Public spellings of objects that torch also exposes under their defining module's path;
# matching the canonical name makes `torch.utils.data.dataloader.DataLoader` count as DataLoader.
CANONICAL = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.autograd.anomaly_mode.set_detect_anomaly": "torch.autograd.set_detect_anomaly",
    "torch.autograd.anomaly_mode.detect_anomaly": "torch.autograd.detect_anomaly",
    "torch.autograd.profiler.emit_nvtx": "torch.autograd.profiler.emit_nvtx",
    "torch.autograd.profiler_legacy.profile": "torch.autograd.profiler.profile",
    "torch.autograd.gradcheck.gradcheck": "torch.autograd.gradcheck",
    "torch.autograd.gradcheck.gradgradcheck": "torch.autograd.gradgradcheck",
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.grad_mode.no_grad": "torch.no_grad",
    "torch.autograd.inference_mode": "torch.inference_mode",
    "torch.autograd.grad_mode.inference_mode": "torch.inference_mode",
    "torch.autograd.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.grad_mode.set_grad_enabled": "torch.set_grad_enabled",
    "torch.amp.autocast": "torch.autocast",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.cuda.amp.autocast": "torch.autocast",
    "torch.cuda.amp.autocast_mode.autocast": "torch.autocast",
    "torch.nn.modules.conv.Conv1d": "torch.nn.Conv1d",
    "torch.nn.modules.conv.Conv2d": "torch.nn.Conv2d",
    "torch.nn.modules.conv.Conv3d": "torch.nn.Conv3d",
    "torch.serialization.save": "torch.save",
}


def dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as a string; None for anything that is not a plain dotted name."""
    # type() is: libcst's node classes are final, and isinstance goes through ABCMeta (hot path)
    kind = type(node)
    if kind is cst.Name:
        return cast(cst.Name, node).value
    if kind is cst.Attribute:
        attribute = cast(cst.Attribute, node)
        base = dotted(attribute.value)
        return f"{base}.{attribute.attr.value}" if base else None
    return None


class ImportTable:
    """Local name → fully qualified name, from every import statement in the file."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.modules: set[str] = set()  # every module the file imports from (for "uses timm" tests)

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)
                if full is None:
                    continue
                self.modules.add(full)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.names[alias.asname.name.value] = full
                else:  # `import torch.utils.data` binds `torch`
                    top = full.split(".")[0]
                    self.names[top] = top
            return
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted(node.module)
        if module is None:
            return
        self.modules.add(module)
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.names[local] = f"{module}.{alias.name.value}"
            self.modules.add(f"{module}.{alias.name.value}")

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The canonical qualified name of a dotted expression, or None if it is not imported."""
        text = dotted(node)
        if text is None:
            return None
        head, _, rest = text.partition(".")
        full = self.names.get(head)
        if full is None:
            return None
        full = f"{full}.{rest}" if rest else full
        return CANONICAL.get(full, full)

    def uses(self, prefix: str) -> bool:
        return any(m == prefix or m.startswith(prefix + ".") for m in self.modules)
