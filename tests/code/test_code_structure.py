"""The code linter's house rules, read from its own imports: no import circle inside archlint.code,
and no private name (`_x`) of one module imported or reached as an attribute from another (a
package's private modules, like checks/_edits.py, may be imported by their siblings)."""

from __future__ import annotations

import ast
from pathlib import Path

import archlint

PACKAGE = Path(archlint.__file__).parent / "code"


def _modules() -> dict[str, ast.Module]:
    return {"archlint." + ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"):
            ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, tree: ast.Module, known: set[str]) -> list[tuple[str, str | None]]:
    """(module, imported name or None) for every archlint.code import in the module, at any depth."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.startswith("archlint.code")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("archlint.code"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.append((sub, None) if sub in known else (node.module, a.name))
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _private_borrowed(name: str, tree: ast.Module, known: set[str]) -> list[str]:
    package = name.rsplit(".", 1)[0]
    found = []
    aliases = {}  # local name → module, for `from archlint.code import dataflow as df`
    for module, imported in _imports(name, tree, known):
        if imported is None:
            continue
        if imported.startswith("_") and not imported.startswith("__") and module != name:
            found.append(f"{name}: from {module} import {imported}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("archlint.code"):
            for a in node.names:
                if f"{node.module}.{a.name}" in known:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in known:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{name}: {aliases[node.value.id]}.{node.attr}")
    for module, _ in _imports(name, tree, known):
        last = module.rsplit(".", 1)
        if last[-1].startswith("_") and not last[-1].startswith("__") and last[0] != package:
            found.append(f"{name}: imports the private module {module} of another package")
    return found


def test_no_import_circle_in_the_code_linter():
    modules = _modules()
    known = set(modules)
    graph = {name: {m for m, _ in _imports(name, tree, known) if m in known and m != name}
             for name, tree in modules.items()}
    assert _cycles(graph) == []


def test_no_private_name_borrowed_between_code_modules():
    modules = _modules()
    known = set(modules)
    assert [f for name, tree in modules.items() for f in _private_borrowed(name, tree, known)] == []


def test_the_checks_find_what_they_are_meant_to_find():
    """The walk above sees a circle and a borrowed name when there is one (it could pass vacuously)."""
    a = ast.parse("from archlint.code import b\nfrom archlint.code.b import _helper\n")
    b = ast.parse("import archlint.code.a\nfrom archlint.code import dataflow as df\nx = df._unwrap\n")
    known = {"archlint.code.a", "archlint.code.b", "archlint.code.dataflow"}
    graph = {"archlint.code.a": {m for m, _ in _imports("archlint.code.a", a, known) if m in known},
             "archlint.code.b": {m for m, _ in _imports("archlint.code.b", b, known) if m in known}}
    assert _cycles({**graph, "archlint.code.dataflow": set()}) == [["archlint.code.a", "archlint.code.b"]]
    assert _private_borrowed("archlint.code.a", a, known) == ["archlint.code.a: from archlint.code.b import _helper"]
    assert _private_borrowed("archlint.code.b", b, known) == ["archlint.code.b: archlint.code.dataflow._unwrap"]
