"""Which model a file defines, found by reading it (ast): for "did you mean model.py:Net?".

Never imports torch nor runs the file: the code linter's path calls it too. A model is a class whose
base is `Module` (nn.Module, torch.nn.Module, LightningModule, Sequential, ...) or another model
class of the file, or a top-level function that returns one (by annotation, or `return Net(...)`,
`return nn.Sequential(...)`, `return torchvision.models.resnet18(...)`, `timm.create_model(...)`).
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

_MODULE_BASES = {"Module", "LightningModule", "Sequential", "ModuleList", "ModuleDict", "PreTrainedModel"}
_BUILDER_ROOTS = ("nn.", "torch.nn.", "torchvision.", "models.", "timm.", "transformers.")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):  # Generic[...] and the like
        return _dotted(node.value)
    return ""


def _last(node: ast.AST) -> str:
    return _dotted(node).rsplit(".", 1)[-1]


def _called(body: ast.AST) -> set[str]:
    return {_last(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}


def model_names(path: Path) -> tuple[list[str], list[str]]:
    """(all model classes and factories of the file, the roots: those no other one of them builds).

    Empty lists when the file cannot be read or parsed (the caller then has nothing to suggest).
    """
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return [], []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    models: dict[str, ast.AST] = {}
    changed = True
    while changed:  # a subclass of a model class of the file is a model too
        changed = False
        for c in classes:
            if c.name not in models and any(_last(b) in _MODULE_BASES or _last(b) in models for b in c.bases):
                models[c.name] = c
                changed = True
    for f in tree.body:
        if not isinstance(f, ast.FunctionDef) or f.name.startswith("_"):
            continue
        returns = {_last(f.returns)} if f.returns is not None else set()
        for r in ast.walk(f):
            if isinstance(r, ast.Return) and isinstance(r.value, ast.Call):
                callee = _dotted(r.value.func)
                returns.add(_last(r.value.func))
                if callee.startswith(_BUILDER_ROOTS) or callee == "create_model":
                    returns.add("Module")
        if returns & (_MODULE_BASES | set(models)):
            models[f.name] = f
    names = [n for n in models if not n.startswith("_")]
    built = set().union(*(_called(models[n]) for n in names)) if names else set()
    roots = [n for n in names if n not in built or isinstance(models[n], ast.FunctionDef)]
    # a factory that builds a class makes that class its implementation detail
    roots = [
        n
        for n in roots
        if not any(isinstance(models[f], ast.FunctionDef) and n in _called(models[f]) for f in names if f != n)
    ]
    return names, roots


def target_hint(path: str) -> str:
    """'; did you mean model.py:Net?', '; it defines model.py:A, model.py:B', or '' (no model found)."""
    names, roots = model_names(Path(path))
    if len(roots) == 1:
        return f"; did you mean {path}:{roots[0]}?"
    if names:
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        return f"; it defines {', '.join(f'{path}:{n}' for n in names[:6])}{more}"
    return ""


def close_name(name: str, candidates: list[str]) -> str | None:
    """The candidate the user most likely meant: same name in another case, else a close spelling."""
    for c in candidates:
        if c.lower() == name.lower():
            return c
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not match:  # 'net' vs 'TinyNet': compare case-insensitively too
        lowered = {c.lower(): c for c in candidates}
        match = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)]
    return match[0] if match else None
