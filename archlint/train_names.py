"""The names and sizes a training step is described by (--optimizer, --loss, --memory-budget),
read here, below the settings that check them and the analyzer that uses them; no torch."""

from __future__ import annotations

import re

from archlint.errors import UsageError

OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
VARIANTS = ("foreach", "fused")  # torch.optim's implementations besides the per-tensor loop
LOSSES = ("mean", "sum")  # the loss over the model's outputs
# decimal (K, KB: 10³) and binary (Ki, KiB: 2¹⁰) units, as Kubernetes spells them; any case
_UNITS = {
    "B": 1,
    **{p + u: 10 ** (3 * n) for n, p in enumerate("KMGT", 1) for u in ("", "B")},
    **{p + u: 2 ** (10 * n) for n, p in enumerate("KMGT", 1) for u in ("I", "IB")},
}
MAX_SIZE = 2**50  # 1 PiB: past it, a typo (999999999999TB), not a device


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
    """Bytes of '24GB' or '24G' (10⁹), '24GiB' or '24Gi' (2³⁰), '8000MB', '512B': one spelling for
    the flag, the config file and the API. A number without a unit is refused: `24` meant 24 bytes,
    which nobody means (did you mean 24GB or 24GiB?)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise UsageError(f"{where} {text!r}: give a size like 24GB, 16GiB or 8000MB")
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Z]*)\s*", str(text).upper())
    shown = repr(text) if len(str(text)) <= 40 else repr(f"{str(text)[:20]}...{str(text)[-8:]}")
    if match and not match.group(2) and float(match.group(1)) > 0:
        number = match.group(1)
        raise UsageError(
            f"{where} {text!r} has no unit; did you mean {number}GB or {number}GiB? (write {number}B for bytes)"
        )
    if not match or match.group(2) not in _UNITS or float(match.group(1)) <= 0:
        raise UsageError(f"{where} {shown}: give a size like 24GB, 16GiB or 8000MB")
    size = float(match.group(1)) * _UNITS[match.group(2)]  # a float first: 5,000 digits are inf, not an error
    if size > MAX_SIZE:
        raise UsageError(
            f"{where} {shown} is past the memory of any device (1 PiB); give the memory the step must fit in, e.g. 80GB"
        )
    return int(size)


# Data-parallel strategies of --train --world-size N --strategy NAME (archlint.model.distributed)
PARALLEL_STRATEGIES = ("ddp", "fsdp", "hsdp", "zero1", "zero2", "zero3", "zero1-torch")
MIXED_PRECISIONS = ("bf16", "fp16")
