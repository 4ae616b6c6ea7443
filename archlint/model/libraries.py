"""Whether a module of the captured model is a library's (transformers, diffusers, timm,
torchvision) or the user's: a library's class is switched with the library's own settings rather
than rewritten, and a finding on it says so."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from torch import nn

TORCH = Path(nn.__file__).resolve().parents[1]  # torch's own classes are never the user's code
LIBRARIES = ("transformers", "diffusers", "timm", "torchvision")


def is_library_file(file: str) -> bool:
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts or Path(file).is_relative_to(TORCH)


def is_torch_file(file: str) -> bool:
    return Path(file).is_relative_to(TORCH)


def library_module(graph: nx.DiGraph, module: str | None) -> str | None:
    """The library the innermost class holding `module` comes from; None for the user's class."""
    if module is None:
        return None
    modules = graph.graph.get("modules", {})
    parts = module.split(".") if module else []
    for p in reversed([""] + [".".join(parts[: i + 1]) for i in range(len(parts))]):
        file = (modules.get(p) or {}).get("file")
        if file:
            found = Path(file).parts
            return next((lib for lib in LIBRARIES if lib in found and is_library_file(file)), None)
    return None
