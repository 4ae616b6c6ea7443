"""The --train options, read in one place for the CLI and the API (no torch imported)."""

from __future__ import annotations

import re

from archlint.errors import UsageError

LOSSES = ("mean", "sum")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(text: str | int, where: str = "--memory-budget") -> int:
    """Bytes of '24GB' (10⁹), '24GiB' (2³⁰), '8000MB', or a plain number of bytes."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?I?B?)\s*", str(text).upper())
    if not match or match.group(2) not in _UNITS or float(match.group(1)) <= 0:
        raise UsageError(f"{where} {text!r}: give a size like 24GB, 16GiB or 8000MB")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def train_settings(settings, optimizer: str | None, loss: str | None, where: str, memory_budget=None) -> None:
    """Turn on the training step in `settings`: mode train, and the optimizer, loss and memory
    budget checked (None keeps the default, which the output names as such)."""
    from archlint.model.train.optimizer import parse

    if optimizer is not None:
        parse(optimizer, where)  # a UsageError naming the choices, before any model is built
    if loss is not None and loss not in LOSSES:
        raise UsageError(f"loss {loss!r}: use one of {', '.join(LOSSES)}")
    settings.train, settings.mode = True, "train"
    settings.optimizer, settings.loss = optimizer, loss
    if memory_budget is not None:
        settings.memory_budget = parse_size(memory_budget, "--memory-budget" if where.startswith("--") else "memory_budget=")
