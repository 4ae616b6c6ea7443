"""archlint's Python API: the command line's two halves as functions, for notebooks and tests.

    >>> import archlint, torchvision
    >>> a = archlint.analyze(torchvision.models.resnet18(), (1, 3, 224, 224))
    >>> a.totals.flops, [d.code for d in a.findings]
    >>> a                        # in Jupyter: a compact report
    >>> archlint.lint(["train.py"], select=["AL3"])

Options mirror the CLI's flags by name (`--input-shape` → `input_shape=`, `--option
AL101.threshold=0.2` → `options={"AL101.threshold": 0.2}`). Both go through `archlint.check.check`,
so a result here is what the CLI reports; errors are `archlint.UsageError` with the CLI's message.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archlint import config
from archlint.check import check, failed
from archlint.config import ModelSpec, Settings
from archlint.diagnostics import Diagnostic
from archlint.errors import UsageError
from archlint.result import Layer, ModelResult, RunResult, Totals

__all__ = ["Analysis", "analyze", "lint"]


@dataclass
class Analysis:
    """One analyzed model: numbers, findings and notes, and every report the CLI can write."""

    result: RunResult
    settings: Settings

    @property
    def model(self) -> ModelResult:
        return self.result.models[0]

    @property
    def totals(self) -> Totals:
        """FLOPs (multiply-adds), MAC bytes, params; latency_ms when measured."""
        return self.model.totals

    @property
    def layers(self) -> list[Layer]:
        return self.model.layers

    @property
    def findings(self) -> list[Diagnostic]:
        return sorted(self.result.diagnostics, key=Diagnostic.sort_key)

    @property
    def notes(self) -> list[str]:
        return self.model.notes

    @property
    def strategy(self) -> str:
        return self.model.strategy

    @property
    def passed(self) -> bool:
        """No findings and no failed budget: what exit code 0 means on the command line."""
        return not failed(self.result)

    def to_dict(self) -> dict[str, Any]:
        """Exactly the CLI's `--output-format json` document (the contract in docs/design.md)."""
        return json.loads(self.to_json())

    def to_json(self, indent: int | None = 2) -> str:
        from archlint.report.json import render

        text = render(self.result, self.settings)
        return text if indent == 2 else json.dumps(json.loads(text), indent=indent)

    def to_html(self, path: str | Path) -> Path:
        """The CLI's `--html` report: one self-contained page."""
        from archlint.report.html import write_html

        write_html(self.result, self.settings, path)
        return Path(path)

    def summary(self) -> str:
        """The CLI's text report, as a string."""
        from archlint.report.text import render

        return render(self.result, self.settings)

    def _repr_html_(self) -> str:
        from archlint.report.notebook import render_notebook

        return render_notebook(self.result, top=self.settings.top)

    def __rich__(self):
        from rich.console import Console
        from rich.text import Text

        from archlint.report.text import print_text

        buffer = io.StringIO()
        print_text(self.result, self.settings, Console(file=buffer, force_terminal=True, width=120, highlight=False))
        return Text.from_ansi(buffer.getvalue())

    def __repr__(self) -> str:
        t = self.totals
        return (
            f"<archlint.Analysis {self.model.target}: {t.flops:,} FLOPs (multiply-adds), {t.mac_bytes:,} MAC bytes, "
            f"{t.params:,} params, {len(self.result.diagnostics)} finding{'' if len(self.result.diagnostics) == 1 else 's'}>"
        )


def analyze(
    model: Any,
    *inputs: Any,
    input_shape: Sequence[Sequence[int]] | Sequence[int] | None = None,
    dtype: str | None = None,
    device: str | None = None,
    init: dict[str, Any] | None = None,
    name: str | None = None,
    config_file: str | Path | None = None,
    **options: Any,
) -> Analysis:
    """Analyze a model: an `nn.Module` object, or a target string "model.py:Net" as on the CLI.

    `inputs` are what the forward takes: tensors, one tuple of them, or shapes such as
    `(1, 3, 224, 224)` (a random float tensor of `dtype` is made for each), and last a dict of
    keyword inputs (`{"input_ids": ids, "attention_mask": mask}`). A target string may
    take `input_shape=` instead, or find its own `example_inputs`. `name` labels an object's
    report and baseline entry (default: its class name). Other options mirror the CLI flags:
    latency, select, extend_select, ignore, options, mode, strategy, warmup, repeat, top,
    max_flops, max_mac, max_params, max_latency_ms, baseline, device_spec, what_if, timeout,
    latency_budget, show_info, train (one training step), optimizer, loss, memory_budget; the per-rank
    step over many GPUs: world_size, strategy ("ddp", "fsdp", "hsdp", "zero1", "zero2", "zero3"), nodes,
    shard_unit, mixed_precision ("bf16"), cpu_offload, trainable (a regular expression).

        >>> archlint.analyze(net, torch.randn(1, 3, 32, 32), latency=True, select=["AL2"])
        >>> archlint.analyze("examples/nets.py:TinyNet", input_shape=(1, 3, 56, 56))
    """
    settings = settings_for(config_file, **options)
    budgets = {k.replace("_", "-"): options.pop(k) for k in list(options) if k in _BUDGETS}
    for key, value in budgets.items():
        config.check_budget(f"{key.replace('-', '_')}=", value)
    if isinstance(model, str):
        if inputs:
            raise UsageError("a target string takes input_shape=..., not tensors; pass the model object for tensors")
        spec = next((m for m in settings.models if m.target == model), None) or ModelSpec(target=model)
        if input_shape is not None:
            shapes = [input_shape] if input_shape and isinstance(input_shape[0], int) else input_shape
            spec.input_shapes = [_shape(s) for s in shapes]
        if init:
            spec.init.update(init)
    else:
        _require_module(model)
        from archlint.model.runtime.walkable import check_walkable

        check_walkable(model, name or type(model).__name__)  # before anything walks it (its dtype, below)
        if init:
            raise UsageError("init= applies to a class or factory target string, not to a model object")
        dtype = dtype or str(_dtype_of(model)).removeprefix("torch.")
        shapes = [input_shape] if input_shape and isinstance(input_shape[0], int) else (input_shape or [])
        args, kwargs = _tensors(inputs or tuple(shapes), dtype)
        if not args and not kwargs:
            raise UsageError(
                f"no inputs for {type(model).__name__}: pass tensors or shapes, e.g. analyze(model, (1, 3, 224, 224))"
            )
        spec = ModelSpec(target=name or type(model).__name__, model=model, given_args=args, given_kwargs=kwargs)
    if dtype:
        from archlint.model.loading.load import parse_dtype

        parse_dtype(dtype)  # a UsageError naming the choices
        spec.dtype = dtype
    if device:
        spec.device = device
    spec.budgets.update(budgets)
    return Analysis(check([], [spec], settings), settings)


def lint(
    paths: str | Path | Iterable[str | Path],
    *,
    fix: bool = False,
    unsafe_fixes: bool = False,
    config_file: str | Path | None = None,
    **options: Any,
) -> list[Diagnostic]:
    """Lint training code as `archlint PATHS` does (same config discovery); with `fix=True`,
    apply the safe fixes (and unsafe ones with `unsafe_fixes=True`) and return what remains.

        >>> [d.code for d in archlint.lint("train.py")]
    """
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    settings = settings_for(config_file, **options)
    settings.fix, settings.unsafe_fixes = fix, unsafe_fixes
    return sorted(check(files, [], settings).diagnostics, key=Diagnostic.sort_key)


_BUDGETS = ("max_flops", "max_mac", "max_params", "max_latency_ms")
_SETTINGS = (
    "mode",
    "strategy",
    "warmup",
    "repeat",
    "top",
    "latency",
    "jobs",
    "cache",
    "baseline",
    "timeout",
    "show_info",
    "quiet",
    "latency_budget",
    "device_spec",
    "what_if",
    "train",
    "optimizer",
    "loss",
    "memory_budget",
    "world_size",
    "nodes",
    "shard_unit",
    "mixed_precision",
    "cpu_offload",
    "trainable",
)


def settings_for(config_file: str | Path | None = None, **options: Any) -> Settings:
    """The nearest pyproject.toml's settings (or `config_file`'s), with keyword overrides laid over
    them by config.apply, as the file's own keys and the CLI's flags are."""
    s = config.load(path=Path(config_file) if config_file else None)
    options = {k: v for k, v in options.items() if v is not None}  # None: not given, as a flag left off
    given: dict[str, Any] = {
        flag: _codes(options.pop(flag), flag)
        for flag in ("select", "extend_select", "ignore")
        if options.get(flag) is not None
    }
    rule_options: dict[str, dict[str, Any]] = {}
    for key, value in (options.pop("options", None) or {}).items():
        code, _, option = key.partition(".")
        if isinstance(value, dict) and not option:  # {"AL101": {"threshold": 0.2}}
            rule_options.setdefault(code.upper(), {}).update(value)
        elif option:  # {"AL101.threshold": 0.2}
            rule_options.setdefault(code.upper(), {})[option.replace("-", "_")] = value
        else:
            raise UsageError(f"options key {key!r} must look like 'CODE.NAME' or map a code to a dict")
    given["rule_options"] = rule_options
    given |= {key: options.pop(key) for key in _SETTINGS if options.get(key) is not None}
    unknown = set(options) - set(_BUDGETS)
    if unknown:
        raise UsageError(f"unknown option {sorted(unknown)[0]}=; see help(archlint.analyze)")
    return config.apply(s, given, label=lambda name: "options=" if name == "rule_options" else f"{name}=")


def _codes(value: str | Iterable[str], flag: str) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(v, str) for v in items):
        raise UsageError(f"{flag}= takes rule codes or prefixes, e.g. ['AL1', 'AL205']")
    return [v.strip().upper() for v in items if v.strip()]


def _shape(value: Any) -> list[int]:
    if isinstance(value, str):
        return config.parse_shape(value)
    if (
        isinstance(value, Sequence)
        and value
        and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value)
    ):
        return list(value)
    raise UsageError(f"input shape {value!r} must be positive integers, e.g. (1, 3, 224, 224)")


def _is_shape(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(d, int) and not isinstance(d, bool) for d in value)
    )


def _tensors(inputs: tuple, dtype: str) -> tuple[tuple, dict]:
    """Positional and keyword inputs: tensors as given, shapes made into seeded random tensors of
    `dtype`; one dict is keyword inputs, one tuple of tensors the positional ones."""
    import torch

    from archlint.model.loading.load import parse_dtype

    kwargs: dict = {}
    if inputs and isinstance(inputs[-1], dict):
        kwargs, inputs = dict(inputs[-1]), inputs[:-1]  # analyze(model, x, {"attention_mask": m})
    if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)) and not _is_shape(inputs[0]):
        inputs = tuple(inputs[0])  # analyze(model, (x, y)): one tuple of positional inputs
    generator = torch.Generator().manual_seed(0)

    def made(value):
        if _is_shape(value) or isinstance(value, torch.Size):
            return torch.randn(_shape(value), generator=generator, dtype=parse_dtype(dtype))
        return value

    return tuple(made(i) for i in inputs), {k: made(v) for k, v in kwargs.items()}


def _require_module(model: Any) -> None:
    try:
        from torch import nn
    except ImportError as exc:
        raise UsageError(
            f"the model analyzer needs torch ({exc.name} is missing): pip install 'archlint[models]'"
        ) from None
    if not isinstance(model, nn.Module):
        raise UsageError(f"analyze() takes an nn.Module or a 'model.py:Net' string, got {type(model).__name__}")


def _dtype_of(model: Any):
    from archlint.model.loading.loaded import dtype_of as _dtype_of

    return _dtype_of(model)
