"""Where a model finding points: the line of the user's source that created its module (or the
innermost module on its path whose class is the user's), the module path common to its ops, and
whether a module comes from a library (transformers, timm, ...) the user configures rather than edits.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import networkx as nx

from archlint.diagnostics import Diagnostic
from archlint.model.checks._query import enclosing_modules
from archlint.model.libraries import is_library_file, is_torch_file, library_module  # noqa: F401 (rules read library_module here)


def finding(graph: nx.DiGraph, code: str, message: str, *, node: str | None, module: str | None, **kw) -> Diagnostic:
    """A Diagnostic located at a model node, its module path and the user's source: the line that
    created the module (`self.conv2 = nn.Conv2d(...)`, or the builder call that made a library
    model), else the innermost module on the path whose class is the user's (a finding on
    `backbone.0.conv2` points at the user's block class, not at torch's Conv2d)."""
    d = Diagnostic(code=code, message=message, node=node, module=module, **kw)
    called = op_source(graph, node)
    if called:  # a functional op (F.relu, a matmul): the line of the user's forward that calls it
        d.file, d.line = called
        return d
    if module is None:
        return d
    modules = graph.graph.get("modules", {})
    holders = list(reversed(enclosing_modules(module)))  # innermost first
    own = (graph.nodes[node].get("module") or "") if node in graph else ""
    if own and own != module and own.startswith(f"{module}.") or (own and not module):
        holders.insert(0, own)  # a layer among several (q of q, k, v): the line that created it
    created = next((modules[p]["created"] for p in holders if modules.get(p, {}).get("created")), None)
    if created:  # where the user's code created the module (recorded at build): the best place
        d.file, d.line = created
        return d
    path = [modules[p] for p in holders if p in modules and modules[p].get("file")]
    # the user's class, else a library's own (transformers' block) before torch's layer inside it
    info = next(
        (i for i in path if not is_library_file(i["file"])),
        next((i for i in path if not is_torch_file(i["file"])), path[0] if path else None),
    )
    if info:
        d.file, d.line = info.get("file"), info.get("line")
    return d


def op_source(graph: nx.DiGraph, node: str | None) -> tuple[str, int] | None:
    """(file, line) of the user's code calling a functional op (recorded at capture), None for a
    module's op or a call inside a library's code."""
    if node is None or node not in graph:
        return None
    source = graph.nodes[node].get("source")
    if not source or str(graph.nodes[node].get("op", "")).startswith("nn.") or is_library_file(source[0]):
        return None
    return source[0], int(source[1])


def describe(graph: nx.DiGraph, node: str) -> str:
    """An op as a reader finds it: "F.relu at net.py:9 in blocks.0.1" (its call in the user's
    forward, and its module's qualified name), else the module path ("layer1.0.relu")."""
    data = graph.nodes[node]
    module = data.get("module") or ""
    where = op_source(graph, node)
    if where:
        inside = f" in {module}" if module else ""
        return f"{data.get('op') or data.get('key')} at {Path(where[0]).name}:{where[1]}{inside}"
    return module or str(data.get("op") or node)


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
