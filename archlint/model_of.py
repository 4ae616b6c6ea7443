"""Which analyzed model a code file trains, read from the file with ast (never run).

Both the code rules priced by a model (AL403, archlint.code.checks.autocast) and the model's checks
of the code's distributed settings (AL410, AL415: archlint.model.links) pair a code finding with the
model analyzed in the same run; the pairing sits here, below both analyzers, so neither imports the
other (docs/design.md, "The house: floors")."""

from __future__ import annotations

import ast
from pathlib import Path

from archlint.result import ModelResult


def model_of(file: str, models: list[ModelResult]) -> ModelResult | None:
    """The only model analyzed, else the one model defined in `file` or in a module it imports."""
    if len(models) == 1:
        return models[0]
    mine = [m for m in models if trains(file, m.target)]
    return mine[0] if len(mine) == 1 else None


def trains(file: str, target: str) -> bool:
    """The code file is the model's file or imports its module (by the module's name: `import
    model`, `from model import Net`, `from .model import Net`, `from pkg import model`). Read with
    ast, never run."""
    path, sep, _ = target.rpartition(":")
    if not sep or not path.endswith(".py"):
        return False  # hf:NAME and the like: no file to match
    model_file, code_file = Path(path).resolve(), Path(file).resolve()
    if model_file == code_file:
        return True
    try:
        tree = ast.parse(code_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    stem = model_file.stem
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[-1] == stem for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (
            (node.module or "").split(".")[-1] == stem or any(a.name == stem for a in node.names)
        ):
            return True
    return False
