"""The folders a file adds to `sys.path` (issue 44 item 5), read statically from its text:
`sys.path.insert(0, os.path.join(os.path.dirname(__file__), "src", "data"))`, `sys.path.append("..")`,
`sys.path.extend([...])`, `sys.path += [...]`, `site.addsitedir(...)`, with `Path(__file__).parent / "src"`
forms and module names bound once to such an expression. Anything else (an argument, an environment
variable, a computed index) is not evaluable and is left out: nothing is ever run.

Paths are relative to the file's folder (the cache keys a summary by content, not location), or
absolute as written. A relative literal and `os.getcwd()` are relative to the folder the program
runs from, taken to be the script's own (`python train.py` from its folder), the usual case.

Where each goes, as Python would place it: "front" (`insert(0, ...)`: before the script's folder),
"middle" (`insert(k, ...)`, k ≠ 0: after the script's folder) and "back" (append, extend, +=).
"""

from __future__ import annotations

import ast
import posixpath

from archlint.code.project_facts import SysPathEntry

# The file's folder stands in as a deep absolute folder, so that posixpath's own dirname/join/normpath
# evaluate the expressions and `..` above the file's folder survives (relpath turns it back).
_DEPTH = 24
_HOME = "/" + "/".join(f"d{i}" for i in range(_DEPTH))
_FILE = _HOME + "/__file__.py"

_ABSPATH = {"os.path.abspath", "os.path.realpath", "os.path.normpath"}
_PATH_CLASSES = {"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath"}
_APPEND = {"sys.path.append", "site.addsitedir"}


class _PathValue(str):
    """A pathlib.Path value (so `/` joins and `.parent` climbs); a plain str is a string."""


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name → the dotted name it imports (`osp` → os.path, `join` → os.path.join)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


class _Evaluator:
    def __init__(self, tree: ast.Module) -> None:
        self.aliases = _aliases(tree)
        bound: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                bound.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                bound.setdefault(node.target.id, []).append(None)  # rebound: not one value
        # a name bound once, anywhere in the file: its one value (bound twice: which one is unknown)
        self.names = {k: v[0] for k, v in bound.items() if len(v) == 1 and v[0] is not None}
        self.active: set[str] = set()

    def dotted(self, node: ast.expr) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.aliases.get(node.id, node.id)
        return ".".join([head, *reversed(parts)])

    def value(self, node: ast.expr) -> str | None:
        """The path an expression evaluates to (under the stand-in folder), or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return _FILE
            if node.id in self.names and node.id not in self.active:
                self.active.add(node.id)  # `A = f(A)` bound once cannot recurse forever
                try:
                    return self.value(self.names[node.id])
                finally:
                    self.active.discard(node.id)
            return None
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left), self.value(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add) and not isinstance(left, _PathValue):
                return left + right
            if isinstance(node.op, ast.Div) and isinstance(left, _PathValue):
                return _PathValue(posixpath.join(left, right))
            return None
        if isinstance(node, ast.Attribute):
            name = self.dotted(node)
            if name in ("os.pardir", "os.path.pardir"):
                return ".."
            if name in ("os.curdir", "os.path.curdir"):
                return "."
            base = self.value(node.value)
            if node.attr == "parent" and isinstance(base, _PathValue):
                return _PathValue(posixpath.dirname(posixpath.normpath(base)))
            return None
        if isinstance(node, ast.JoinedStr):  # f"{ROOT}/src"
            parts = [
                self.value(v.value)
                if isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None
                else self.value(v)
                if isinstance(v, ast.Constant)
                else None
                for v in node.values
            ]
            return None if None in parts else "".join(str(p) for p in parts)
        if isinstance(node, ast.Subscript):
            return self.item(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        return None

    def item(self, node: ast.Subscript) -> str | None:
        """`Path(__file__).parents[1]`, `os.path.split(p)[0]`, `sys.path[0]` (the script's folder)."""
        index = node.slice
        if not (isinstance(index, ast.Constant) and isinstance(index.value, int) and not isinstance(index.value, bool)):
            return None
        if index.value == 0 and self.dotted(node.value) == "sys.path":
            return _HOME
        if (
            index.value == 0
            and isinstance(node.value, ast.Call)
            and self.dotted(node.value.func) == "os.path.split"
            and len(node.value.args) == 1
            and not node.value.keywords
        ):
            path = self.value(node.value.args[0])
            return posixpath.split(path)[0] if path is not None else None
        if isinstance(node.value, ast.Attribute) and node.value.attr == "parents" and 0 <= index.value < 8:
            base = self.value(node.value.value)
            if isinstance(base, _PathValue):
                path = posixpath.normpath(base)
                for _ in range(index.value + 1):
                    path = posixpath.dirname(path)
                return _PathValue(path)
        return None

    def call(self, node: ast.Call) -> str | None:
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        name = self.dotted(node.func)
        if name == "os.getcwd" and not node.args:
            return _HOME
        if (
            isinstance(node.func, ast.Attribute)
            and name not in ("os.path.join", "os.path.dirname")
            and (name is None or not name.startswith(("os.", "pathlib.")))
        ):
            # a method of a value: Path(...).resolve() / .absolute() / .joinpath(...) / .as_posix()
            base = self.value(node.func.value)
            if not isinstance(base, _PathValue):
                return None
            method = node.func.attr
            if method in ("resolve", "absolute", "expanduser") and not node.args:
                return _PathValue(posixpath.normpath(posixpath.join(_HOME, base)))
            if method == "as_posix" and not node.args:
                return str(base)
            if method == "joinpath":
                args = [self.value(a) for a in node.args]
                return None if None in args else _PathValue(posixpath.join(base, *args))
            return None
        args = [self.value(a) for a in node.args]
        if None in args:
            return None
        if name in _PATH_CLASSES:
            return _PathValue(posixpath.join(*args) if args else ".")
        if name in ("str", "os.fspath") and len(args) == 1:
            return str(args[0])
        if name == "os.path.join" and args:
            return posixpath.join(*args)
        if name == "os.path.dirname" and len(args) == 1:
            return posixpath.dirname(args[0])
        if name in _ABSPATH and len(args) == 1:
            return posixpath.normpath(posixpath.join(_HOME, args[0]))
        return None


def _relative(path: str) -> str | None:
    """The evaluated path relative to the file's folder ("" → "."), or as written if absolute."""
    if not path:
        return "."
    if not path.startswith("/"):
        return posixpath.normpath(path)
    if path == "/d0" or path.startswith("/d0/"):  # the stand-in folder, or one above it
        return posixpath.relpath(posixpath.normpath(path), _HOME)
    return posixpath.normpath(path)


def added_paths(tree: ast.Module) -> list[SysPathEntry]:
    """The folders added, in the order Python would search them: "front" ones first (the last
    `insert(0, ...)` first), then "middle", then "back" (in the order appended)."""
    ev = _Evaluator(tree)
    front: list[str] = []
    middle: list[str] = []
    back: list[str] = []
    nodes = sorted(
        (n for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.AugAssign))), key=lambda n: (n.lineno, n.col_offset)
    )
    for node in nodes:
        if isinstance(node, ast.AugAssign):  # sys.path += [a, b]
            if (
                isinstance(node.op, ast.Add)
                and ev.dotted(node.target) == "sys.path"
                and isinstance(node.value, (ast.List, ast.Tuple))
            ):
                back += [p for e in node.value.elts if (p := _evaluated(ev, e))]
            continue
        name = ev.dotted(node.func)
        if node.keywords:
            continue
        if name in _APPEND and len(node.args) == 1:
            if p := _evaluated(ev, node.args[0]):
                back.append(p)
        elif name == "sys.path.extend" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
            back += [p for e in node.args[0].elts if (p := _evaluated(ev, e))]
        elif name == "sys.path.insert" and len(node.args) == 2:
            index = node.args[0]
            if not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
                continue  # a computed position: where it lands is unknown
            if p := _evaluated(ev, node.args[1]):
                (front if index.value == 0 else middle).insert(0, p)
    out, seen = [], set()
    for where, paths in (("front", front), ("middle", middle), ("back", back)):
        for p in paths:
            if p not in seen:
                seen.add(p)
                out.append(SysPathEntry(where, p))
    return out


def _evaluated(ev: _Evaluator, node: ast.expr) -> str | None:
    value = ev.value(node)
    return _relative(str(value)) if value is not None else None


def added_paths_of(source: str) -> list[SysPathEntry]:
    """added_paths of a file's text; [] when it never touches the path or does not parse."""
    if "sys.path" not in source and "addsitedir" not in source:
        return []
    try:
        return added_paths(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: CPython's nesting limit
        return []  # too deep to read (a 10,000-term sum): no path taken from it
