"""A model's module tree is one torch itself can walk, or a UsageError that says why not.

torch walks `_modules` in `named_modules()` (a set of the modules seen: each module must be
hashable) and in `train()`/`eval()` (no memo: a module that holds one of its ancestors as a
submodule recurses until Python's limit). Either would end the analysis with a traceback from
deep inside torch; this names the module and the fix instead, before anything runs.
"""

from __future__ import annotations

from torch import nn

from archlint.errors import UsageError


def check_walkable(model: nn.Module, target: str) -> None:
    """UsageError for a submodule whose class sets `__hash__ = None`, or a cycle in the tree."""
    stack: list[tuple[str, nn.Module, dict[int, str]]] = [("", model, {})]
    seen: set[int] = set()  # a shared module is walked once (a cycle through it is found the first time)
    while stack:
        path, module, ancestors = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if type(module).__hash__ is None:
            raise UsageError(
                f"{target}: the module {path or '(the model)'} ({type(module).__name__}) is unhashable (its class "
                "defines __eq__ without __hash__, or sets __hash__ = None) and torch's named_modules() cannot walk it; "
                "give the class `__hash__ = nn.Module.__hash__`"
            )
        inner = {**ancestors, id(module): path or "the model"}
        for name, child in module._modules.items():
            if child is None:
                continue
            where = f"{path}.{name}" if path else name
            if id(child) in inner:
                raise UsageError(
                    f"{target}: the module tree has a cycle ({where} is {inner[id(child)]}, which holds it): "
                    "torch's train()/eval() would recurse forever; keep the back-reference out of the tree: set it "
                    "with object.__setattr__ (not registered as a submodule) or hold a weakref"
                )
            stack.append((where, child, inner))
