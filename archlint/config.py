"""[tool.archlint] in pyproject.toml → Settings. Command-line flags override the file."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from collections.abc import Callable

from archlint.errors import UsageError
from archlint.train_names import LOSSES, MIXED_PRECISIONS, PARALLEL_STRATEGIES, parse_optimizer, parse_size

OUTPUT_FORMATS = ("text", "json", "sarif", "github", "junit")
MODES = ("eval", "train")


@dataclass
class InputSpec:
    """One input given by shape: `1,128`, `1,128:int64`, or as a keyword `input_ids=1,128:int64`."""

    shape: list[int]
    dtype: str | None = None  # None: the spec's input_dtype, else the model's dtype
    name: str | None = None  # a keyword argument of forward; None: positional


@dataclass
class ModelSpec:
    """One model to analyze: from `[[tool.archlint.models]]` or from a PATH.py:NAME argument."""

    target: str
    input_shapes: list[list[int]] = field(default_factory=list)  # positional inputs, in order
    input_dtypes: list[str | None] = field(default_factory=list)  # per positional input; None: input_dtype
    keyword_inputs: dict[str, InputSpec] = field(default_factory=dict)  # name → keyword input
    input_dtype: str | None = None  # inputs without their own dtype; None: the model's dtype
    inputs_source: str = "--input-shape"  # where the positional inputs came from, for errors
    dtype: str = "float32"
    device: str = "cpu"
    init: dict[str, Any] = field(default_factory=dict)
    hf_config: dict[str, Any] = field(default_factory=dict)  # hf:NAME targets: config fields to override
    decode: int | None = None  # also analyze one decode step with a KV cache of this many tokens
    budgets: dict[str, float] = field(default_factory=dict)  # max-flops, max-mac, ...
    device_spec: str | None = None  # --device-spec NAME|FILE for this model (overrides the global one)
    # From the Python API: a model object and its inputs, used instead of loading `target`.
    model: Any = field(default=None, repr=False, compare=False)
    given_args: tuple = field(default=(), repr=False, compare=False)
    given_kwargs: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


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
    max_file_size: int = 2_000_000  # bytes; larger files are skipped (code/guard.py says why)
    # Model analyzer
    mode: str = "eval"
    strategy: str | None = None  # force one capture strategy (fx | export | dispatch); None: first that works
    top: int = 15  # costliest layers shown in the text table
    tree: bool = False  # the text table shows the module tree instead of the op table (--tree)
    tree_depth: int | None = None  # levels of that tree (--depth); None: report.tree's default
    latency: bool = False
    warmup: int = 10
    repeat: int = 50
    trace_dir: Path | None = None
    device_spec: str | None = None  # estimate latency on this spec (NAME or TOML file): archlint.devices
    what_if: list[str] | None = None  # --what-if: transformations to time (None: off); implies latency
    timeout: float | None = None  # seconds for each stage that runs a model's code; None: no limit
    latency_budget: float = 120.0  # seconds --latency may spend timing one model (archlint.model.timing.budget)
    train: bool = False  # --train: analyze one training step (implies mode "train"): archlint.model.train
    optimizer: str | None = None  # --optimizer for --train; None: the default (archlint.model.train.optimizer)
    loss: str | None = None  # --loss for --train: mean | sum of the outputs; None: mean
    memory_budget: int | None = None  # --memory-budget for --train, in bytes: does the step fit
    # --train over many GPUs (archlint.model.distributed): the per-rank step of a data-parallel strategy
    parallel: str | None = None  # --strategy ddp|fsdp|hsdp|zero1|zero2|zero3 (API strategy=); None: one process
    world_size: int | None = None  # --world-size: ranks in all (the input is the per-rank batch)
    nodes: int | None = None  # --nodes: hosts the ranks are spread over (HSDP shards within one; the links)
    shard_unit: str | None = None  # --shard-unit CLASS: FSDP2/ZeRO-3's unit; None: the repeated block found
    mixed_precision: str | None = None  # --mixed-precision bf16|fp16: compute copies, fp32 master and state
    cpu_offload: bool = False  # --cpu-offload: optimizer state (ZeRO-Offload, FSDP CPUOffloadPolicy) on the host
    trainable: str | None = None  # --trainable PATTERN: parameters whose name matches train, the rest frozen
    # Gate
    baseline: Path | None = None
    save_baseline: Path | None = None
    tolerance: dict[str, float] = field(default_factory=dict)  # metric → allowed growth (0.02)
    # Output
    output_format: str = "text"
    output_file: Path | None = None
    html: Path | None = None
    exit_zero: bool = False
    verbose: bool = False  # text output adds why fallbacks were taken (ModelResult.details)
    show_info: bool = False  # text/GitHub/JUnit output hide info findings unless this is set
    statistics: bool = False
    quiet: bool = False  # no progress display
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

    def relpath(self, file: str | Path) -> str:
        """`file` relative to the project root, in POSIX form (as SARIF, GitHub and baselines want);
        a file outside the root keeps its absolute path."""
        path = Path(file)
        absolute = path if path.is_absolute() else Path.cwd() / path
        try:
            return absolute.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return absolute.resolve().as_posix()

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
            if "archlint" in _tool_table(data, candidate):
                return candidate
    return None


def _tool_table(data: dict, path: Path) -> dict:
    """The file's [tool] table. A `tool` that is not a table is an error naming the file, as ruff
    refuses any pyproject.toml it cannot read on its way up: no tool reads such a file."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise UsageError(f"{path}: `tool` must be a table ([tool.NAME] sections), got {_shown(tool)}; fix the file")
    return tool


def load(start: Path | None = None, path: Path | None = None, overrides: list[str] = ()) -> Settings:
    """Settings from the given pyproject.toml, or the nearest one above `start`, with `--config
    KEY=VALUE` overrides (archlint.overrides) laid over its [tool.archlint] table."""
    from archlint import overrides as over

    start = (start or Path.cwd()).resolve()
    path = path or find_pyproject(start)
    laid = {}
    for item in overrides:  # each checked on its own first, so an error names the flag, not the file
        table = over.setting(item, SETTING_KEYS)
        from_table(table, root=path.resolve().parent if path else start, source=f"--config {item}")
        laid = over.merged(laid, table)
    if path is None:
        return from_table(laid, root=start, source="--config") if laid else Settings(root=start)
    if not path.is_file():
        raise UsageError(f"config file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the file") from None
    table = _tool_table(data, path).get("archlint", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.archlint] must be a table")
    settings = from_table(over.merged(table, laid), root=path.resolve().parent, source=str(path))
    for model in settings.models:  # targets in the file are relative to its directory, not the cwd
        if model.target.startswith("hf:"):
            continue
        file, _, name = model.target.rpartition(":")
        if not Path(file).is_absolute():
            model.target = f"{Path(os.path.relpath(settings.root / file, start)).as_posix()}:{name}"
    return settings


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
    "max-file-size",
    "timeout",
    "latency-budget",
    "mode",
    "warmup",
    "repeat",
    "tolerance",
    "output-format",
    "device-spec",
    "what-if",
}
SETTING_KEYS = frozenset(_KEYS)  # what `--config KEY=VALUE` can set
_MODEL_KEYS = {
    "target",
    "input-shapes",
    "input-shape",
    "inputs",
    "input-dtype",
    "dtype",
    "device",
    "init",
    "config",
    "budgets",
    "device-spec",
}
_BUDGETS = {"max-flops", "max-mac", "max-params", "max-latency-ms"}
# [tool.archlint] tolerance key → the ModelResult.totals field it bounds
TOLERANCE_KEYS = {"flops": "flops", "mac": "mac_bytes", "params": "params", "latency-ms": "latency_ms"}
DTYPES = ("float32", "float16", "bfloat16", "float64")
# Inputs may also be integer (token ids) or boolean (masks); the names torch prints, and aliases.
INPUT_DTYPES = {
    **{d: d for d in DTYPES},
    "float": "float32",
    "fp32": "float32",
    "half": "float16",
    "fp16": "float16",
    "bf16": "bfloat16",
    "double": "float64",
    "int64": "int64",
    "long": "int64",
    "int32": "int32",
    "int": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:\d+)?")
_TARGET = re.compile(r".+\.py:[A-Za-z_]\w*|hf:[\w.-]+")


def _codes(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"[tool.archlint] {key} must be a list of rule codes, got {value!r}")
    return [v.upper() if v.upper() != "ALL" else "ALL" for v in value]


def check_selectors(codes: list[str], where: str) -> None:
    """Every selector must name a rule or a prefix of one: a typo would silently select nothing."""
    from archlint.registry import catalog

    known = catalog()
    for code in codes:
        if code != "ALL" and not any(c.startswith(code) for c in known):
            raise UsageError(f"{where}: unknown rule code {code!r}; `archlint rules` lists them")


def documented_options(page: str) -> set[str] | None:
    """Option names from a rule page's "## Options" table (`| `name` | default | meaning |`);
    an empty set when the page says the rule takes none, None when the page has no such section."""
    _, found, section = page.partition("\n## Options")
    if not found:
        return None
    section = section.split("\n## ", 1)[0]
    return set(re.findall(r"^\|\s*`([A-Za-z_][\w-]*)`\s*\|", section, flags=re.MULTILINE))


def check_rule_options(options: dict[str, dict[str, Any]], where: str) -> None:
    """Per-rule options: an existing code, option names its page documents, non-negative
    thresholds. (The rule checks the names again when it runs: Settings.options.)"""
    from archlint.registry import catalog

    for code, values in options.items():
        if code not in catalog():
            raise UsageError(f"{where}: unknown rule code {code!r}; `archlint rules` lists them")
        known = documented_options(catalog()[code].body)
        for name, value in values.items():
            if known is not None and name not in known:
                takes = f"it takes: {', '.join(sorted(known))}" if known else "it takes none"
                raise UsageError(f"{where}: unknown option {name!r} for {code}; {takes} (`archlint rule {code}`)")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise UsageError(f"{where}: {code}.{name} must be ≥ 0, got {value!r}")


def split_codes(text: str | None) -> list[str]:
    """`AL101, al2` → ["AL101", "AL2"]: a --select/--extend-select/--ignore value."""
    return [t.strip().upper() for t in (text or "").split(",") if t.strip()]


def parse_value(text: str):
    """An --option or --init value: int, float, true/false, else the text itself."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def apply_rule_flags(
    s: Settings,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    options: list[str],
    parse=parse_value,
    example: str = "AL101.threshold=0.2",
) -> None:
    """--select, --extend-select, --ignore and --option over the settings from the file: one
    reading for every command. `parse` turns an option's text into its value (ValueError: it
    takes a number)."""
    if select:
        s.select = split_codes(select)
    s.extend_select += split_codes(extend_select)
    s.ignore += split_codes(ignore)
    for flag, value in (("select", select), ("extend-select", extend_select), ("ignore", ignore)):
        check_selectors(split_codes(value), f"--{flag}")
    for item in options:
        key, eq, text = item.partition("=")
        code, dot, name = key.partition(".")
        if not (eq and dot and code and name):
            raise UsageError(f"--option {item!r} must look like CODE.NAME=VALUE, e.g. {example}")
        try:
            value = parse(text)
        except ValueError:
            raise UsageError(f"--option {item!r}: {code}.{name} takes a number") from None
        s.rule_options.setdefault(code.upper(), {})[name.replace("-", "_")] = value


def check_budget(label: str, value: Any) -> None:
    """A budget is a finite number ≥ 0 (0: nothing allowed); NaN would pass every comparison."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise UsageError(f"{label} must be a finite number ≥ 0, got {value!r}")


def check_baseline(path: Path | None) -> None:
    if path is not None and not path.is_file():
        raise UsageError(f"baseline file {path} does not exist; create it with --save-baseline {path}")


# ---- One way to set Settings fields, whoever gives them: a [tool.archlint] key, a command-line flag
# or an API keyword. Each field has one check; `label(field)` names it as the user wrote it
# ("--warmup", "warmup=", "pyproject.toml: [tool.archlint] warmup") in the one-line error.


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _typed(kind: type) -> Callable[[Any, str], Any]:
    def check(value: Any, where: str) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise UsageError(f"{where} must be {kind.__name__}, got {value!r}")
        return value

    return check


def _one_of(allowed: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, where: str) -> str:
        if value not in allowed:
            raise UsageError(f"{where} must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return check


def _at_least(low: int) -> Callable[[Any, str], int]:
    def check(value: Any, where: str) -> int:
        value = _typed(int)(value, where)
        if value < low:
            raise UsageError(f"{where} must be ≥ {low}, got {value!r}")
        return value

    return check


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:  # also rejects nan
        raise UsageError(f"{where} must be a number > 0, got {_shown(value)}")
    return float(value)


def _megabytes(value: Any, where: str) -> int:
    if _positive(value, where) == float("inf"):
        raise UsageError(f"{where} must be a finite number of MB, got {_shown(value)}; give a size such as 10")
    return int(value * 1e6)


def _selectors(value: Any, where: str) -> list[str]:
    check_selectors(value, where)
    return list(value)


def _device_spec_name(value: Any, where: str) -> str:
    from archlint import devices

    if not isinstance(value, str) or not value:
        raise UsageError(f'{where} must be a spec name such as "rtx4090" or a TOML file path')
    devices.resolve(value)  # a bad name or file is an error before any model is built
    return value


def _what_if(value: Any, where: str) -> list[str]:
    return what_if_names(value, where)


def _existing_baseline(value: Any, where: str) -> Path:
    check_baseline(Path(value))
    return Path(value)


def _regex(value: Any, where: str) -> str:
    import re

    try:
        re.compile(str(value))
    except re.error as exc:
        raise UsageError(f"{where} {value!r}: not a regular expression ({exc})") from None
    return str(value)


def _optimizer(value: Any, where: str) -> str:
    parse_optimizer(value, where)  # a UsageError naming the choices, before any model is built
    return value


def _rule_options(value: Any, where: str) -> dict[str, dict[str, Any]]:
    check_rule_options(value, where)
    return value


FIELD_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "select": _selectors,
    "extend_select": _selectors,
    "ignore": _selectors,
    "rule_options": _rule_options,
    "cache": _typed(bool),
    "jobs": _at_least(0),
    "warmup": _at_least(0),
    "repeat": _at_least(1),
    "mode": _one_of(MODES),
    "output_format": _one_of(OUTPUT_FORMATS),
    "max_file_size": _megabytes,
    "timeout": _positive,
    "latency_budget": _positive,
    "device_spec": _device_spec_name,
    "what_if": _what_if,
    "baseline": _existing_baseline,
    "optimizer": _optimizer,
    "loss": _one_of(LOSSES),
    "memory_budget": parse_size,
    "parallel": _one_of(PARALLEL_STRATEGIES),
    "world_size": _at_least(1),
    "nodes": _at_least(1),
    "mixed_precision": _one_of(MIXED_PRECISIONS),
    "cpu_offload": _typed(bool),
    "trainable": _regex,
}
ADDED = ("extend_select", "ignore")  # these add to what the file selected; every other field replaces


def apply(s: Settings, values: dict[str, Any], label: Callable[[str], str]) -> Settings:
    """Lay the given values (Settings field names; None: not given) over `s`, each checked by its
    field's one rule, then settle what one field implies for another: --what-if and --trace need
    latency; --train (or any of its options) traces the forward in train mode. The TOML table, the command line and the API all build Settings through here."""
    for name, value in values.items():
        if value is None:
            continue
        if name == "strategy" and value in PARALLEL_STRATEGIES:  # --strategy names a capture or a distributed one
            name = "parallel"
        if not hasattr(s, name):
            raise TypeError(f"Settings has no field {name!r}")  # a caller's bug, not the user's
        check = FIELD_CHECKS.get(name)
        value = check(value, label(name)) if check else value
        if name in ADDED:
            value = getattr(s, name) + value
        elif name == "rule_options":  # per code: an option given here joins the file's others
            value = {
                **s.rule_options,
                **{code: {**s.rule_options.get(code, {}), **opts} for code, opts in value.items()},
            }
        setattr(s, name, value)
    if s.what_if is not None or s.trace_dir is not None:
        s.latency = True
    if s.optimizer is not None or s.loss is not None or s.memory_budget is not None:
        s.train = True  # the training step's options ask for the training step
    needs = [n for n in ("nodes", "shard_unit", "mixed_precision", "trainable") if getattr(s, n) is not None]
    needs += ["cpu_offload"] if s.cpu_offload else []
    if needs and s.parallel is None and s.world_size is None:
        raise UsageError(
            f"{label(needs[0])} applies to the distributed step: give --strategy NAME and --world-size N "
            "(1 for one GPU)"
        )
    if s.parallel is not None or s.world_size is not None:
        s.train = True  # a distributed step is a training step
        s.parallel = s.parallel or "ddp"
        s.world_size = s.world_size or 1
        if s.nodes is not None and s.world_size % s.nodes:
            raise UsageError(
                f"{label('world_size')} {s.world_size} is not a multiple of {label('nodes')} {s.nodes}: "
                "give as many ranks on each node"
            )
    if s.train:
        s.mode = "train"
    return s


SCALAR_KEYS = (
    "cache",
    "jobs",
    "mode",
    "warmup",
    "repeat",
    "output-format",
    "max-file-size",
    "timeout",
    "latency-budget",
)


def from_table(table: dict[str, Any], root: Path, source: str = "pyproject.toml") -> Settings:
    unknown = set(table) - _KEYS
    if unknown:
        raise UsageError(f"{source}: unknown key [tool.archlint] {sorted(unknown)[0]!r}")
    s = Settings(root=root)
    for key in ("per-file-ignores", "module-ignores"):
        if not isinstance(table.get(key, {}), dict):
            raise UsageError(f"{source}: [tool.archlint] {key} must be a table of lists")
    # per-file-ignores: file glob → codes, as ruff's
    s.per_file_ignores = {k: _codes(v, f"per-file-ignores.{k}") for k, v in table.get("per-file-ignores", {}).items()}
    for pattern, codes in s.per_file_ignores.items():
        check_selectors(codes, f"{source}: [tool.archlint] per-file-ignores {pattern!r}")
    # module-ignores: code → module-path globs ("backbone.layer3.*"), for model findings
    module_ignores = table.get("module-ignores", {})
    for code, globs in module_ignores.items():
        if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
            raise UsageError(f"{source}: [tool.archlint] module-ignores.{code} must be a list of module-path globs")
    s.module_ignores = {code.upper(): list(globs) for code, globs in module_ignores.items()}
    check_selectors(list(s.module_ignores), f"{source}: [tool.archlint] module-ignores")
    rules = table.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise UsageError(f"{source}: [tool.archlint.rules] must hold one table per rule code")
    models = table.get("models", [])
    if not isinstance(models, list):
        raise UsageError(f"{source}: [tool.archlint] models must be an array of tables ([[tool.archlint.models]])")
    s.models = [_model_spec(m, i, source, root) for i, m in enumerate(models)]
    if "cache-dir" in table:
        if not isinstance(table["cache-dir"], str):
            raise UsageError(f"{source}: [tool.archlint] cache-dir must be a path string")
        s.cache_dir = root / table["cache-dir"]
    if "tolerance" in table:
        s.tolerance = _tolerance(table["tolerance"], source)
    given = {
        key.replace("-", "_"): _codes(table[key], key) for key in ("select", "extend-select", "ignore") if key in table
    }
    given["rule_options"] = {
        code.upper(): {k.replace("-", "_"): v for k, v in opts.items()} for code, opts in rules.items()
    }
    given |= {key.replace("-", "_"): table[key] for key in SCALAR_KEYS if key in table}
    if "device-spec" in table:
        given["device_spec"] = _device_spec(table["device-spec"], root, f"{source}: [tool.archlint] device-spec")
    if table.get("what-if", False) is not False:  # true (all), "all", "a,b" or ["a", "b"]
        given["what_if"] = table["what-if"]

    def label(name: str) -> str:
        return (
            f"{source}: [tool.archlint.rules]"
            if name == "rule_options"
            else f"{source}: [tool.archlint] {name.replace('_', '-')}"
        )

    return apply(s, given, label)


def _device_spec(value: Any, root: Path, where: str) -> str:
    """A built-in spec name, or a TOML file relative to the config's directory; validated now."""
    from archlint import devices

    if isinstance(value, str) and value and value not in devices.builtin_names() and not Path(value).is_absolute():
        value = str(root / value)
    return _device_spec_name(value, where)


def what_if_names(value: Any, where: str) -> list[str]:
    """The --what-if transformations named by a flag or config value (true or "all": every one)."""
    if not isinstance(value, (bool, str, list)) or value is False:
        raise UsageError(f'{where} must be true, "all" or a list of transformations, got {value!r}')
    from archlint.whatif_names import parse_names

    return parse_names(value, where)


def _tolerance(value: Any, source: str) -> dict[str, float]:
    where = f"{source}: [tool.archlint] tolerance"
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be a table such as {{ flops = 0.02, latency-ms = 0.25 }}")
    tolerance = {}
    for key, amount in value.items():
        if key not in TOLERANCE_KEYS:
            raise UsageError(f"{where}: unknown metric {key!r}; use {', '.join(TOLERANCE_KEYS)}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise UsageError(f"{where}: {key} must be a non-negative fraction (0.02 = 2%), got {amount!r}")
        tolerance[TOLERANCE_KEYS[key]] = float(amount)
    return tolerance


def parse_shape(text: str) -> list[int]:
    """`1,3,224,224` (or `1x3x224x224`) → [1, 3, 224, 224]; every part a positive integer."""
    parts = str(text).strip().replace("x", ",").split(",")
    try:
        shape = [int(p) for p in parts]
    except ValueError:
        raise UsageError(
            f"input shape {text!r} is not a comma-separated list of positive integers (e.g. 1,3,224,224)"
        ) from None
    if any(d <= 0 for d in shape):
        raise UsageError(f"input shape {text!r} must be positive integers (e.g. 1,3,224,224)")
    return shape


def parse_input_dtype(text: str, where: str) -> str:
    name = INPUT_DTYPES.get(str(text).lower().removeprefix("torch."))
    if name is None:
        raise UsageError(
            f"{where}: unknown input dtype {text!r}; use one of float32, float16, bfloat16, float64, "
            "int64, int32, int16, int8, uint8, bool"
        )
    return name


def parse_input(text: str, where: str = "--input-shape", keyword: bool = False) -> InputSpec:
    """`SHAPE[:DTYPE]`, or with keyword=True `NAME=SHAPE[:DTYPE]` (e.g. `input_ids=1,128:int64`)."""
    name = None
    if keyword:
        name, eq, text = str(text).partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise UsageError(
                f"{where} {name + eq + text!r} must look like NAME=SHAPE[:DTYPE], e.g. input_ids=1,128:int64"
            )
    shape_text, colon, dtype = str(text).partition(":")
    try:
        shape = parse_shape(shape_text)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return InputSpec(shape, parse_input_dtype(dtype.strip(), where) if colon else None, name)


def _shape(value: Any, where: str) -> list[int]:
    if isinstance(value, str):
        return parse_shape(value)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value)
    ):
        return list(value)
    raise UsageError(
        f'{where}: input shape {value!r} must be positive integers, e.g. [1, 3, 224, 224] or "1,3,224,224"'
    )


def _input(value: Any, where: str) -> InputSpec:
    """A shape as a list of ints, or as text with an optional dtype: "1,128:int64"."""
    if isinstance(value, str):
        return parse_input(value, where)
    return InputSpec(_shape(value, where))


def _model_spec(entry: Any, index: int, source: str, root: Path = Path(".")) -> ModelSpec:
    where = f"{source}: [[tool.archlint.models]] entry {index + 1}"
    if not isinstance(entry, dict) or "target" not in entry:
        raise UsageError(f"{where} needs a 'target' such as \"model.py:Net\"")
    unknown = set(entry) - _MODEL_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    target = entry["target"]
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise UsageError(f'{where}: target {target!r} must look like "path/model.py:ClassName"')
    where = f"{source}: [[tool.archlint.models]] {target!r}"
    if "input-shapes" in entry and "input-shape" in entry:
        raise UsageError(f"{where}: give input-shapes or input-shape, not both")
    shapes = entry.get("input-shapes", [entry["input-shape"]] if "input-shape" in entry else [])
    if not isinstance(shapes, list):
        raise UsageError(f"{where}: input-shapes must be a list of shapes, e.g. [[1, 3, 224, 224]]")
    positional = [_input(v, where) for v in shapes]
    keyword = entry.get("inputs", {})
    if not isinstance(keyword, dict):
        raise UsageError(f'{where}: inputs must be a table of keyword inputs, e.g. {{ input_ids = "1,128:int64" }}')
    keyword_inputs = {}
    for key, value in keyword.items():
        spec = _input(value, f"{where}: inputs.{key}")
        spec.name = key
        keyword_inputs[key] = spec
    input_dtype = entry.get("input-dtype")
    if input_dtype is not None:
        input_dtype = parse_input_dtype(input_dtype, f"{where}: input-dtype")
    dtype = entry.get("dtype", "float32")
    if dtype not in DTYPES:
        raise UsageError(f"{where}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    device = entry.get("device", "cpu")
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        raise UsageError(f"{where}: device must be cpu, cuda, cuda:N, mps or xpu, got {device!r}")
    hf_config = entry.get("config", {})
    if not isinstance(hf_config, dict) or (hf_config and not target.startswith("hf:")):
        raise UsageError(f"{where}: config is a table of config fields for an hf:NAME target, e.g. {{ n_layer = 4 }}")
    init = entry.get("init", {})
    if not isinstance(init, dict):
        raise UsageError(f"{where}: init must be a table of constructor arguments, e.g. {{ num_classes = 10 }}")
    budgets = entry.get("budgets", {})
    if not isinstance(budgets, dict):
        raise UsageError(f"{where}: budgets must be a table, e.g. {{ max-flops = 3e8 }}")
    bad = set(budgets) - _BUDGETS
    if bad:
        raise UsageError(f"{where}: unknown budget {sorted(bad)[0]!r}; use {', '.join(sorted(_BUDGETS))}")
    for name, value in budgets.items():
        check_budget(f"{where}: budget {name}", value)
    return ModelSpec(
        target=target,
        input_shapes=[i.shape for i in positional],
        input_dtypes=[i.dtype for i in positional],
        keyword_inputs=keyword_inputs,
        input_dtype=input_dtype,
        inputs_source=f"input-shapes of [[tool.archlint.models]] {target!r}",
        dtype=dtype,
        device=device,
        init=dict(init),
        hf_config=dict(hf_config),
        budgets=dict(budgets),
        device_spec=_device_spec(entry["device-spec"], root, f"{where}: device-spec")
        if "device-spec" in entry
        else None,
    )
