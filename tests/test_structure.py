"""The house's rules, read from archlint's own imports (docs/design.md, "The house: floors"): no
import circle, no import up a floor, no private name borrowed from another module, no cited
document missing. Each check is a plain AST walk over the source; nothing is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "archlint"

# floor → module name prefixes (the longest matching prefix decides); see docs/design.md
FLOORS = {
    0: ("archlint.errors", "archlint.diagnostics", "archlint.result", "archlint.units", "archlint.printable",
        "archlint.outputs", "archlint.overrides", "archlint.usage", "archlint.suggest", "archlint.registry",
        "archlint.devices", "archlint.whatif_names", "archlint.train_names"),
    1: ("archlint.config", "archlint.progress"),
    2: ("archlint.code", "archlint.model", "archlint.trace", "archlint.loader"),
    3: ("archlint.report", "archlint.gate"),
    4: ("archlint.cli", "archlint.args", "archlint.api", "archlint.check", "archlint.loader.command",
        "archlint.trace.command", "archlint.pytest_plugin", "archlint.testing", "archlint.__main__"),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module that `name` (a module or a name inside one) belongs to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for each archlint import in `module`."""
    out = []
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("archlint"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:  # `from archlint.model import checks`: the submodule itself
                    out.append((full, "", node.lineno))
                else:
                    out.append((_owner(node.module) or node.module, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(_owner(a.name) or a.name, "", node.lineno) for a in node.names if a.name.startswith("archlint")]
    return out


def _floor(module: str) -> int | None:
    best = max(((len(p), floor) for floor, prefixes in FLOORS.items() for p in prefixes
                if module == p or module.startswith(p + ".")), default=None)
    return best[1] if best else None


def _edges() -> dict[str, set[str]]:
    """Module → the archlint modules it imports (a package's own parents left out: importing a
    submodule always runs its package's __init__, which is no dependency of the code)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _, _ in _imports(module):
            if target != module and not module.startswith(target + "."):
                edges[module].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def test_every_module_has_a_floor():
    assert [m for m in MODULES if m != "archlint" and _floor(m) is None] == []


def test_no_import_circle():
    assert _cycles(_edges()) == []


def test_no_import_up_a_floor():
    up = []
    for module in MODULES:
        if module == "archlint":  # the package's face re-exports the API (floor 4) on purpose
            continue
        for target, name, line in _imports(module):
            if target == "archlint":  # `from archlint import __version__`
                continue
            if _floor(target) is not None and _floor(target) > _floor(module):
                up.append(f"{module}:{line} imports {target} (floor {_floor(target)} > {_floor(module)})")
    assert up == []


def test_no_private_name_borrowed_from_another_module():
    borrowed = []
    for module in MODULES:
        for target, name, line in _imports(module):
            if name.startswith("_") and not name.startswith("__") and target != module:
                borrowed.append(f"{module}:{line} imports {target}.{name}")
    assert borrowed == []


def test_cited_documents_exist():
    cited = set()
    for path in MODULES.values():
        cited |= set(re.findall(r"\b((?:docs|rules|benchmarks)/[\w./-]+\.(?:md|py|toml))\b", path.read_text(encoding="utf-8")))
        cited |= set(re.findall(r"\b([A-Z]+\.md)\b", path.read_text(encoding="utf-8")))
    placeholders = ("CODE", "NAME")  # a pattern such as rules/CODE-NAME.md, not a citation
    missing = sorted(c for c in cited if not any(p in c for p in placeholders) and not (ROOT / c).exists())
    assert missing == []


@pytest.mark.parametrize("broken, expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_the_cycle_finder_finds_cycles(broken, expected):
    assert _cycles(broken) == expected
