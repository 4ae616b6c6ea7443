"""The house's rules, read from archlint's own imports (docs/design.md, "The house: floors"): no
import circle (between modules, and between the sub-packages and modules of each package), no
import up a floor, no analyzer importing another, no private name borrowed from another module, no
cited document missing. Each check is a plain AST walk over the source; nothing is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "archlint"

# floor → module name prefixes (the longest matching prefix decides); see docs/design.md
FLOORS = {
    0: (
        "archlint.errors",
        "archlint.diagnostics",
        "archlint.result",
        "archlint.units",
        "archlint.printable",
        "archlint.outputs",
        "archlint.writeguard",
        "archlint.overrides",
        "archlint.usage",
        "archlint.suggest",
        "archlint.registry",
        "archlint.devices",
        "archlint.whatif_names",
        "archlint.train_names",
        "archlint.train_result",
        "archlint.model_of",
        "archlint.declarations",
        "archlint.collector",
    ),
    1: ("archlint.config", "archlint.progress"),
    2: ("archlint.code", "archlint.model", "archlint.trace", "archlint.loader"),
    3: ("archlint.report", "archlint.gate"),
    4: (
        "archlint.cli",
        "archlint.args",
        "archlint.api",
        "archlint.check",
        "archlint.loader.command",
        "archlint.loader.run",
        "archlint.loader.verdict",  # the loader's run, with the model step beside it
        "archlint.trace.command",
        "archlint.pytest_plugin",
        "archlint.testing",
        "archlint.__main__",
    ),
}
ANALYZERS = ("archlint.code", "archlint.model", "archlint.trace", "archlint.loader")  # floor 2: side by side
# An analyzer importing another, named with why it stays (each a finding of issue 40 left open):
CROSSING_KNOWN = {
    (
        "archlint.loader.load",
        "archlint.model.loading.load",
    ): "the data pipeline's file is imported as a model's file is (import_file: its package, sys.path, seeded)",
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


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def _imports(module: str, tree: ast.Module | None = None) -> list[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for each archlint import in `module`."""
    out = []
    for node in ast.walk(tree or _tree(module)):
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


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _borrowed(module: str, tree: ast.Module | None = None) -> list[str]:
    """Private names of other modules that `module` imports or reaches as an attribute
    (`from archlint.code import dataflow as df; df._unwrap`), and private modules of another package."""
    tree = tree or _tree(module)
    found = []
    for target, name, line in _imports(module, tree):
        if _private(name) and target != module:
            found.append(f"{module}:{line} imports {target}.{name}")
        if _private(target.rpartition(".")[2]) and target.rpartition(".")[0] != _package(module):
            found.append(f"{module}:{line} imports the private module {target} of another package")
    aliases = {}  # local name → the archlint module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("archlint"):
            aliases |= {
                a.asname or a.name: f"{node.module}.{a.name}"
                for a in node.names
                if f"{node.module}.{a.name}" in MODULES
            }
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name in MODULES}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
            and aliases[node.value.id] != module
        ):
            found.append(f"{module}:{node.lineno} reaches {aliases[node.value.id]}.{node.attr}")
    return found


def _floor(module: str) -> int | None:
    best = max(
        (
            (len(p), floor)
            for floor, prefixes in FLOORS.items()
            for p in prefixes
            if module == p or module.startswith(p + ".")
        ),
        default=None,
    )
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


def _rooms(edges: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """package → the import edges between its direct children (its sub-packages and modules), each
    module standing for the child of the package that holds it; a command module stands for itself."""

    def child(module: str, package: str) -> str:
        if module in FLOORS[4]:  # a command (trace/command) is a floor-4 room of its own, whatever folder holds it
            return module
        return f"{package}.{module[len(package) + 1 :].split('.')[0]}"

    rooms: dict[str, dict[str, set[str]]] = {}
    for module, targets in edges.items():
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            for target in targets:
                if target.startswith(package + ".") and child(target, package) != child(module, package):
                    rooms.setdefault(package, {}).setdefault(child(module, package), set()).add(child(target, package))
    return rooms


def _analyzer(module: str) -> str | None:
    return next((a for a in ANALYZERS if module == a or module.startswith(a + ".")), None)


def _crossings(imports: dict[str, list[str]], floor=None) -> list[tuple[str, str]]:
    """(module, imported module) where an analyzer's floor-2 module imports another analyzer's
    module; floor-0/1 modules are what they share."""
    floor = floor or _floor
    return [
        (module, target)
        for module, targets in sorted(imports.items())
        for target in targets
        if floor(module) == 2 and _analyzer(module) and _analyzer(target) and _analyzer(target) != _analyzer(module)
    ]


def test_every_module_has_a_floor():
    assert [m for m in MODULES if m != "archlint" and _floor(m) is None] == []


def test_no_import_circle():
    assert _cycles(_edges()) == []


def test_no_import_circle_between_the_rooms_of_a_package():
    """Within each package (archlint, archlint.model, archlint.model.train, ...), its sub-packages
    and modules import one another in one direction: model/checks may use model/speedups and
    model/train, and neither uses model/checks."""
    assert {package: _cycles(room) for package, room in _rooms(_edges()).items() if _cycles(room)} == {}


def test_no_analyzer_imports_another():
    """code/, model/, trace/ and loader/ sit side by side on floor 2: what two of them need sits on a
    floor below (archlint.model_of, archlint.declarations); what combines them sits above
    (archlint.check, archlint.loader.run)."""
    imports = {m: [target for target, _, _ in _imports(m)] for m in MODULES}
    found = set(_crossings(imports))
    assert sorted(found - set(CROSSING_KNOWN)) == []
    assert sorted(set(CROSSING_KNOWN) - found) == []  # one fixed is taken off the list


def test_no_import_up_a_floor():
    up = []
    for module in MODULES:
        if module == "archlint":  # the package's face re-exports the API (floor 4) on purpose
            continue
        for target, _name, line in _imports(module):
            if target == "archlint":  # `from archlint import __version__`
                continue
            if _floor(target) is not None and _floor(target) > _floor(module):
                up.append(f"{module}:{line} imports {target} (floor {_floor(target)} > {_floor(module)})")
    assert up == []


def test_no_private_name_borrowed_from_another_module():
    assert [b for module in MODULES for b in _borrowed(module)] == []


def test_the_borrowing_check_finds_what_it_is_meant_to_find():
    """Planted cases (the walk could pass vacuously): an imported private name, one reached through
    a module alias, a private module of another package; a sibling's private module is allowed."""
    planted = ast.parse(
        "from archlint.code.dataflow import _x\nfrom archlint.code import dataflow as df\n"
        "y = df._unwrap\nfrom archlint.model.checks import _query\n"
    )
    assert _borrowed("archlint.code.lint", planted) == [
        "archlint.code.lint:1 imports archlint.code.dataflow._x",
        "archlint.code.lint:4 imports the private module archlint.model.checks._query of another package",
        "archlint.code.lint:3 reaches archlint.code.dataflow._unwrap",
    ]
    sibling = ast.parse("from archlint.model.checks import _query\n")
    assert _borrowed("archlint.model.checks.fragmentation", sibling) == []


def test_cited_documents_exist():
    cited = set()
    for path in MODULES.values():
        cited |= set(
            re.findall(r"\b((?:docs|rules|benchmarks)/[\w./-]+\.(?:md|py|toml))\b", path.read_text(encoding="utf-8"))
        )
        cited |= set(re.findall(r"\b([A-Z]+\.md)\b", path.read_text(encoding="utf-8")))
    placeholders = ("CODE", "NAME")  # a pattern such as rules/CODE-NAME.md, not a citation
    missing = sorted(c for c in cited if not any(p in c for p in placeholders) and not (ROOT / c).exists())
    assert missing == []


@pytest.mark.parametrize(
    "broken, expected",
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(broken, expected):
    assert _cycles(broken) == expected


def test_the_room_check_finds_a_planted_cycle():
    """A cycle between two rooms of a package through different modules (no module cycle), as
    model/checks → speedups/fix_timing and speedups/links → checks was; and none when one way."""
    planted = {
        "archlint.model.checks.fold": {"archlint.model.speedups.fix_timing"},
        "archlint.model.speedups.links": {"archlint.model.checks"},
        "archlint.model.speedups.fix_timing": set(),
        "archlint.model.checks": set(),
    }
    assert _cycles(planted) == []  # no module imports itself back: only the rooms do
    assert _cycles(_rooms(planted)["archlint.model"]) == [["archlint.model.checks", "archlint.model.speedups"]]
    del planted["archlint.model.speedups.links"]
    assert _cycles(_rooms(planted)["archlint.model"]) == []
    # one level down too: archlint.model.train's rooms
    nested = {
        "archlint.model.train.fit.a": {"archlint.model.train.memory"},
        "archlint.model.train.memory": {"archlint.model.train.fit.b"},
    }
    assert _cycles(_rooms(nested)["archlint.model.train"]) == [
        ["archlint.model.train.fit", "archlint.model.train.memory"]
    ]


def test_the_crossing_check_finds_a_planted_analyzer_import():
    """The model analyzer importing the code linter (model/speedups/links → code.checks, as it did) is
    found; through a floor-0 module, or from a floor-4 module that combines them, it is not."""
    planted = {
        "archlint.model.speedups.links": ["archlint.code.checks", "archlint.model_of", "archlint.result"],
        "archlint.trace.analyze": ["archlint.loader.measure"],
        "archlint.code.checks.autocast": ["archlint.model_of"],
        "archlint.check": ["archlint.code.checks", "archlint.model.links"],
    }
    assert _crossings(planted) == [
        ("archlint.model.speedups.links", "archlint.code.checks"),
        ("archlint.trace.analyze", "archlint.loader.measure"),
    ]
