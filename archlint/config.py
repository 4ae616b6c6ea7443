"""[tool.archlint] in pyproject.toml → Settings. Command-line flags override the file."""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from archlint.errors import UsageError


@dataclass
class ModelSpec:
    """One model to analyze: from `[[tool.archlint.models]]` or from a PATH.py:NAME argument."""

    target: str
    input_shapes: list[list[int]] = field(default_factory=list)
    dtype: str = "float32"
    device: str = "cpu"
    init: dict[str, Any] = field(default_factory=dict)
    budgets: dict[str, float] = field(default_factory=dict)  # max-flops, max-mac, ...


@dataclass
class Settings:
    # Rule selection, ruff-style: codes or prefixes ("AL3"); "ALL" selects everything.
    select: list[str] = field(default_factory=lambda: ["ALL"])
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)  # glob → codes
    # Per-module silencing of model findings: code → module-path globs ("backbone.layer3.*").
    module_ignores: dict[str, list[str]] = field(default_factory=dict)
    # Rule thresholds: code → {option: value}. Each check declares its defaults.
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: list[ModelSpec] = field(default_factory=list)
    # Code linter
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    cache: bool = True
    cache_dir: Path | None = None
    jobs: int = 0  # 0: all cores
    # Model analyzer
    mode: str = "eval"
    latency: bool = False
    warmup: int = 10
    repeat: int = 50
    trace_dir: Path | None = None
    # Gate
    baseline: Path | None = None
    save_baseline: Path | None = None
    tolerance: dict[str, float] = field(default_factory=dict)  # metric → allowed growth (0.02)
    # Output
    output_format: str = "text"
    output_file: Path | None = None
    html: Path | None = None
    exit_zero: bool = False
    statistics: bool = False
    debug: bool = False
    root: Path = field(default_factory=Path.cwd)  # the project root: where pyproject.toml is

    def _matches(self, code: str, selectors: list[str]) -> bool:
        return any(s == "ALL" or code.startswith(s) for s in selectors)

    def enabled(self, code: str, file: str | None = None) -> bool:
        if not self._matches(code, self.select + self.extend_select):
            return False
        if self._matches(code, self.ignore):
            return False
        if file is not None:
            for pattern, codes in self.per_file_ignores.items():
                if _path_matches(file, pattern) and self._matches(code, codes):
                    return False
        return True

    def module_ignored(self, code: str, module: str | None) -> bool:
        if module is None:
            return False
        return any(
            self._matches(code, [selector]) and any(fnmatch.fnmatchcase(module, g) for g in globs)
            for selector, globs in self.module_ignores.items()
        )

    def options(self, code: str, defaults: dict[str, Any]) -> dict[str, Any]:
        """A check's options: its defaults overridden by config and command line."""
        given = self.rule_options.get(code, {})
        unknown = set(given) - set(defaults)
        if unknown:
            raise UsageError(
                f"unknown option {sorted(unknown)[0]!r} for {code}; it takes: {', '.join(sorted(defaults))}"
            )
        return {**defaults, **given}


def _path_matches(file: str, pattern: str) -> bool:
    path = Path(file).as_posix()
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(Path(file).name, pattern)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.archlint] table, walking up from start."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise UsageError(f"{candidate}: not valid TOML ({exc}); fix the file") from None
            if "archlint" in data.get("tool", {}):
                return candidate
    return None


def load(start: Path | None = None, path: Path | None = None) -> Settings:
    """Settings from the given pyproject.toml, or the nearest one above `start`."""
    start = (start or Path.cwd()).resolve()
    path = path or find_pyproject(start)
    if path is None:
        return Settings(root=start)
    if not path.is_file():
        raise UsageError(f"config file {path} does not exist")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    table = data.get("tool", {}).get("archlint", {})
    return from_table(table, root=path.parent, source=str(path))


_KEYS = {
    "select",
    "extend-select",
    "ignore",
    "per-file-ignores",
    "module-ignores",
    "rules",
    "models",
    "cache",
    "cache-dir",
    "jobs",
    "mode",
    "warmup",
    "repeat",
    "tolerance",
    "output-format",
}
_MODEL_KEYS = {"target", "input-shapes", "input-shape", "dtype", "device", "init", "budgets"}
_BUDGETS = {"max-flops", "max-mac", "max-params", "max-latency-ms"}


def _codes(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"[tool.archlint] {key} must be a list of rule codes, got {value!r}")
    return [v.upper() if v.upper() != "ALL" else "ALL" for v in value]


def from_table(table: dict[str, Any], root: Path, source: str = "pyproject.toml") -> Settings:
    unknown = set(table) - _KEYS
    if unknown:
        raise UsageError(f"{source}: unknown key [tool.archlint] {sorted(unknown)[0]!r}")
    s = Settings(root=root)
    if "select" in table:
        s.select = _codes(table["select"], "select")
    s.extend_select = _codes(table.get("extend-select", []), "extend-select")
    s.ignore = _codes(table.get("ignore", []), "ignore")
    for key, attr in (("per-file-ignores", "per_file_ignores"), ("module-ignores", "module_ignores")):
        value = table.get(key, {})
        if not isinstance(value, dict):
            raise UsageError(f"{source}: [tool.archlint] {key} must be a table of lists")
        setattr(s, attr, {k: _codes(v, f"{key}.{k}") for k, v in value.items()})
    rules = table.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise UsageError(f"{source}: [tool.archlint.rules] must hold one table per rule code")
    s.rule_options = {code.upper(): {k.replace("-", "_"): v for k, v in opts.items()} for code, opts in rules.items()}
    s.models = [_model_spec(m, i, source) for i, m in enumerate(table.get("models", []))]
    for key, attr, kind in (
        ("cache", "cache", bool),
        ("jobs", "jobs", int),
        ("mode", "mode", str),
        ("warmup", "warmup", int),
        ("repeat", "repeat", int),
        ("output-format", "output_format", str),
    ):
        if key in table:
            if not isinstance(table[key], kind):
                raise UsageError(f"{source}: [tool.archlint] {key} must be {kind.__name__}, got {table[key]!r}")
            setattr(s, attr, table[key])
    if "cache-dir" in table:
        s.cache_dir = root / table["cache-dir"]
    if "tolerance" in table:
        tol = table["tolerance"]
        if not isinstance(tol, dict) or any(not isinstance(v, (int, float)) or v < 0 for v in tol.values()):
            raise UsageError(f"{source}: [tool.archlint] tolerance must map metrics to non-negative numbers")
        s.tolerance = {k.replace("-", "_"): float(v) for k, v in tol.items()}
    return s


def parse_shape(text: str) -> list[int]:
    try:
        shape = [int(p) for p in str(text).replace("x", ",").split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"input shape {text!r} is not a comma-separated list of integers (e.g. 1,3,224,224)") from None
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"input shape {text!r} must be positive integers (e.g. 1,3,224,224)")
    return shape


def _model_spec(entry: Any, index: int, source: str) -> ModelSpec:
    where = f"{source}: [[tool.archlint.models]] entry {index + 1}"
    if not isinstance(entry, dict) or "target" not in entry:
        raise UsageError(f"{where} needs a 'target' such as \"model.py:Net\"")
    unknown = set(entry) - _MODEL_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    shapes = entry.get("input-shapes", [entry["input-shape"]] if "input-shape" in entry else [])
    budgets = entry.get("budgets", {})
    bad = set(budgets) - _BUDGETS
    if bad:
        raise UsageError(f"{where}: unknown budget {sorted(bad)[0]!r}; use {', '.join(sorted(_BUDGETS))}")
    for name, value in budgets.items():
        if not isinstance(value, (int, float)) or value <= 0:
            raise UsageError(f"{where}: budget {name} must be a positive number, got {value!r}")
    return ModelSpec(
        target=str(entry["target"]),
        input_shapes=[parse_shape(s) if isinstance(s, str) else list(s) for s in shapes],
        dtype=entry.get("dtype", "float32"),
        device=entry.get("device", "cpu"),
        init=dict(entry.get("init", {})),
        budgets=dict(budgets),
    )
