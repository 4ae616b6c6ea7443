"""The units FSDP2 (`fully_shard` per block) and ZeRO-3 gather and free together."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torch import nn

from archlint.errors import UsageError
from archlint.model.train.fit import checkpoint_candidates


@dataclass(frozen=True)
class Units:
    paths: list[str]  # in registration order; the rest of the parameters are the root's
    class_name: str | None
    basis: str


def shard_units(model: nn.Module, shard_unit: str | None = None) -> Units:
    """`fully_shard` on each module of class `shard_unit` (outermost), or by default on each
    repeated block (the children of a ModuleList or Sequential holding two or more modules of one
    class: transformer layers, ResNet blocks) of the commonest such class, and on the root."""
    if shard_unit is not None:
        paths = [p for p, m in model.named_modules() if p and type(m).__name__ == shard_unit]
        paths = [p for p in paths if not any(p.startswith(q + ".") for q in paths)]
        if not paths:
            names = sorted({type(m).__name__ for _, m in model.named_modules()})
            raise UsageError(
                f"--shard-unit {shard_unit}: no module of that class in the model; its classes: "
                f"{', '.join(names[:12])}{' …' if len(names) > 12 else ''}"
            )
        return Units(paths, shard_unit, f"fully_shard on each {shard_unit} (--shard-unit) and on the root")
    blocks = checkpoint_candidates(model)
    if not blocks:
        return Units([], None, "no repeated block found: the whole model is one unit (fully_shard on the root only)")
    classes = Counter(type(model.get_submodule(p)).__name__ for p in blocks)
    name = min(classes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    paths = [p for p in blocks if type(model.get_submodule(p)).__name__ == name]
    return Units(
        paths,
        name,
        f"fully_shard on each {name} ({len(paths)} blocks, the repeated block found; "
        "--shard-unit CLASS to choose) and on the root",
    )
