"""Where a model finding points: the line of the user's source that created its module (or the
innermost module on its path whose class is the user's), the module path common to its ops, and
whether a module comes from a library (transformers, timm, ...) the user configures rather than edits.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import networkx as nx
from torch import nn

from archlint.diagnostics import Diagnostic
from archlint.model.checks._query import enclosing_modules

_TORCH = Path(nn.__file__).resolve().parents[1]  # torch's own classes are never the user's code
_LIBRARIES = ("transformers", "diffusers", "timm", "torchvision")


def finding(graph: nx.DiGraph, code: str, message: str, *, node: str | None, module: str | None, **kw) -> Diagnostic:
    """A Diagnostic located at a model node, its module path and the user's source: the line that
    created the module (`self.conv2 = nn.Conv2d(...)`, or the builder call that made a library
    model), else the innermost module on the path whose class is the user's (a finding on
    `backbone.0.conv2` points at the user's block class, not at torch's Conv2d)."""
    d = Diagnostic(code=code, message=message, node=node, module=module, **kw)
    if module is None:
        return d
    modules = graph.graph.get("modules", {})
    holders = list(reversed(enclosing_modules(module)))  # innermost first
    created = next((modules[p]["created"] for p in holders if modules.get(p, {}).get("created")), None)
    if created:  # where the user's code created the module (recorded at build): the best place
        d.file, d.line = created
        return d
    path = [modules[p] for p in holders if p in modules and modules[p].get("file")]
    info = next((i for i in path if not is_library_file(i["file"])), path[0] if path else None)
    if info:
        d.file, d.line = info.get("file"), info.get("line")
    return d


def common_module(graph: nx.DiGraph, nodes: Iterable[str]) -> str:
    """The deepest module path containing all the given ops ("" for the root)."""
    paths = [(graph.nodes[n].get("module") or "").split(".") for n in nodes]
    paths = [p for p in paths if p != [""]]
    if not paths:
        return ""
    common = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)


def library_module(graph: nx.DiGraph, module: str | None) -> str | None:
    """The library a module's class comes from (transformers, diffusers, timm, torchvision): the
    user switches it with the library's own settings rather than rewriting it; None for the user's."""
    if module is None:
        return None
    modules = graph.graph.get("modules", {})
    for p in reversed(enclosing_modules(module)):
        file = (modules.get(p) or {}).get("file")
        if file:
            parts = Path(file).parts
            return next((lib for lib in _LIBRARIES if lib in parts and is_library_file(file)), None)
    return None


def is_library_file(file: str) -> bool:
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts or Path(file).is_relative_to(_TORCH)
