"""The names and sizes a training step is described by (--optimizer, --loss, --memory-budget),
read here, below the settings that check them and the analyzer that uses them; no torch."""

from __future__ import annotations

import re

from archlint.errors import UsageError

OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
VARIANTS = ("foreach", "fused")  # torch.optim's implementations besides the per-tensor loop
LOSSES = ("mean", "sum")  # the loss over the model's outputs
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_optimizer(text: str, where: str = "--optimizer") -> tuple[str, str]:
    """'adamw' → ("adamw", ""), 'adam-fused' → ("adam", "fused"), 'sgd-momentum-foreach', ..."""
    value = str(text).strip().lower()
    for variant in VARIANTS:
        base = value.removesuffix("-" + variant)
        if base != value and base in OPTIMIZERS:
            return base, variant
    if value in OPTIMIZERS:
        return value, ""
    choices = ", ".join(f"{n}[-foreach|-fused]" for n in OPTIMIZERS)
    raise UsageError(f"{where} {text!r}: use one of {choices}")


def parse_size(text: str | int, where: str = "--memory-budget") -> int:
    """Bytes of '24GB' (10⁹), '24GiB' (2³⁰), '8000MB', or a plain number of bytes."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?I?B?)\s*", str(text).upper())
    if not match or match.group(2) not in _UNITS or float(match.group(1)) <= 0:
        raise UsageError(f"{where} {text!r}: give a size like 24GB, 16GiB or 8000MB")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


# Data-parallel strategies of --train --world-size N --strategy NAME (archlint.model.distributed)
PARALLEL_STRATEGIES = ("ddp", "fsdp", "hsdp", "zero1", "zero2", "zero3")
MIXED_PRECISIONS = ("bf16", "fp16")
