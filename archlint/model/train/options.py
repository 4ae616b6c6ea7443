"""The --train options, read in one place for the CLI and the API (no torch imported)."""

from __future__ import annotations

from archlint.errors import UsageError

LOSSES = ("mean", "sum")


def train_settings(settings, optimizer: str | None, loss: str | None, where: str) -> None:
    """Turn on the training step in `settings`: mode train, and the optimizer and loss checked
    (None keeps the default, which the output names as such)."""
    from archlint.model.train.optimizer import parse

    if optimizer is not None:
        parse(optimizer, where)  # a UsageError naming the choices, before any model is built
    if loss is not None and loss not in LOSSES:
        raise UsageError(f"loss {loss!r}: use one of {', '.join(LOSSES)}")
    settings.train, settings.mode = True, "train"
    settings.optimizer, settings.loss = optimizer, loss
