"""Where a finding lives in the repository, for reporters that annotate source (SARIF, GitHub,
JUnit). Code findings carry their file and line. Model findings carry the file and line of the
module's creation in the user's code (`self.conv = nn.Conv2d(...)`, or the builder call that made
a library model; archlint.model.loading.created), else of the module's class when it is the user's;
otherwise (a class in torch or an installed package) they fall back to the line of the target in
the user's file (`model.py:Net` → `class Net`, `def net`, or the import of a library model), so
the annotation still lands in the user's repository; the module path goes in the message. An
`hf:NAME` model has no user file: its findings point at the library class (`library`)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from archlint.config import Settings
from archlint.diagnostics import Diagnostic


@dataclass(frozen=True)
class Where:
    file: str | None  # relative to the project root, POSIX
    line: int | None
    column: int | None
    end_line: int | None
    end_column: int | None
    fallback: bool = False  # True: placed at the target class, not where the rule pointed
    library: bool = False  # True: an absolute path outside the project (an hf: model's class in transformers)
    trace: bool = False  # True: the trace file itself (a trace finding the trace's stacks did not place in code)


def locate(d: Diagnostic, settings: Settings) -> Where:
    if d.file and d.cell is not None:  # a notebook: line and column count in the cell, not in the file
        return Where(settings.relpath(d.file), None, None, None, None)
    if d.file:
        file = settings.relpath(d.file)
        # A model finding located in a library (torch's own nn.Conv2d) cannot annotate the
        # user's repository: point at their model class instead.
        if not (d.target and Path(file).is_absolute()):
            return Where(file, d.line, d.column, d.end_line, d.end_column)
    if d.target and _trace_rule(d.code):
        # No stacks in the trace: the finding is about the trace file (SARIF needs a file: GitHub
        # code scanning refuses a result with only a logical location). Standard input has none.
        if d.target == "<stdin>":
            return Where(None, None, None, None, None)
        return Where(settings.relpath(d.target), None, None, None, None, trace=True)
    path, sep, name = (d.target or "").rpartition(":")
    if path == "hf":  # built from a config: no user file at all; the library class is the place
        if d.file:
            return Where(Path(d.file).resolve().as_posix(), d.line, d.column, d.end_line, d.end_column, library=True)
        return Where(None, None, None, None, None)
    if sep and path:
        file = Path(path)
        if not file.is_absolute() and not file.exists():
            file = settings.root / file  # a target from [[tool.archlint.models]]: relative to the root
        return Where(settings.relpath(file), class_line(str(file.resolve()), name), None, None, None, True)
    return Where(None, None, None, None, None)


def _trace_rule(code: str) -> bool:
    from archlint.registry import catalog

    info = catalog().get(code)
    return info is not None and info.scope == "trace"


@functools.lru_cache(maxsize=256)
def class_line(path: str, name: str) -> int | None:
    """The line that defines the target at the top of the file: `class name` or `def name`, else
    `name = ...` (an instance), else the import that brought it in (`from torchvision.models
    import resnet18`: a model from an installed package is located at the user's line)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            found = node.lineno  # the last binding wins, as at import time
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            found = node.lineno
    return found


def subject(d: Diagnostic) -> str | None:
    """The module a model finding names (its OpGraph node when no module is known); None for
    code findings and for findings about the whole model (module "")."""
    if d.module is not None:
        return d.module or None
    return d.node
