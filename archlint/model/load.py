"""Resolve `PATH.py:NAME` into a model and example inputs.

NAME may be an `nn.Module` subclass, a function returning a module (both called with the `--init`
keyword arguments), or a module-level instance (used as it is: never changed, never copied).

Inputs, in this order of preference:
  1. `--input-shape` (repeatable, one per positional input), random tensors of `--dtype`;
  2. an `example_inputs` attribute of the target itself (e.g. a staticmethod of the class);
  3. in the target file, a function `example_inputs()` or an attribute `EXAMPLE_INPUTS`:
     a tensor, or a tuple/list of positional arguments (tensors or lists of tensors).

Classes and factories are built under `torch.device("meta")` first (no memory, no init
arithmetic: counting needs shapes only); when that fails (a constructor that needs real data) or
when latency is requested (timing needs real weights), they are built normally. `Loaded.build`
says which ran.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
from torch import nn

from archlint.config import ModelSpec, Settings
from archlint.errors import UsageError

DTYPES = {
    "float32": torch.float32, "float": torch.float32, "fp32": torch.float32,
    "float16": torch.float16, "half": torch.float16, "fp16": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "double": torch.float64,
}
EXAMPLE_NAMES = ("example_inputs", "EXAMPLE_INPUTS")


@dataclass
class Loaded:
    model: nn.Module
    inputs: tuple
    build: str  # "meta" | "real" | "given"
    dtype: torch.dtype
    notes: list[str] = field(default_factory=list)
    factory: Callable[[], nn.Module] | None = None  # a real build, for strategies that run the model
    # Real inputs, made only when a strategy or measurement runs the model (`inputs` holds meta
    # placeholders until then: a 1×3×20000×20000 input costs nothing to count).
    make_inputs: Callable[[], tuple] | None = None

    @property
    def on_meta(self) -> bool:
        return any(t.device.type == "meta" for t in _state(self.model))

    def real_inputs(self) -> tuple:
        if self.make_inputs is not None:
            self.inputs, self.make_inputs = self.make_inputs(), None
        return self.inputs

    def real_model(self) -> nn.Module:
        """The model with real weights (built again if it was built on meta)."""
        if self.on_meta and self.factory is not None:
            self.model = self.factory()
            self.build = "real"
        return self.model


def _state(model: nn.Module):
    yield from model.parameters()
    yield from model.buffers()


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def import_file(path: Path) -> ModuleType:
    if path.suffix != ".py" or not path.is_file():
        raise UsageError(f"{path}: no such Python file; give PATH.py:NAME with an existing file")
    resolved = path.resolve()
    name = f"_archlint_target_{resolved.stem}_{hashlib.sha1(str(resolved).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(resolved.parent))  # sibling imports of the target file
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        del sys.modules[name]
        raise UsageError(
            f"importing {path} failed: {_one_line(exc)}; install the missing package or fix the import"
        ) from exc
    except Exception as exc:
        del sys.modules[name]
        raise UsageError(f"importing {path} raised {_one_line(exc)}; fix the file") from exc
    except BaseException:  # sys.exit(), Ctrl-C, --timeout (sandbox.user_code words them): not cached half-done
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(str(resolved.parent))
    return module


def _candidates(module: ModuleType) -> list[str]:
    found = []
    for key, value in vars(module).items():
        if key.startswith("_"):
            continue
        if isinstance(value, nn.Module) or (
            inspect.isclass(value) and issubclass(value, nn.Module) and value.__module__ == module.__name__
        ):
            found.append(key)
    return found


def resolve(target: str) -> tuple[Path, ModuleType, str, Any]:
    file, sep, name = target.rpartition(":")
    if not sep or not name.isidentifier():
        raise UsageError(f"target {target!r} must look like PATH.py:NAME, e.g. model.py:Net")
    path = Path(file)
    module = import_file(path)
    if not hasattr(module, name):
        found = _candidates(module)
        hint = f"; it defines {', '.join(found)}" if found else "; it defines no nn.Module"
        raise UsageError(f"{path} has no {name!r}{hint}")
    return path, module, name, getattr(module, name)


def _check_arguments(factory: Callable, name: str, init: dict[str, Any]) -> None:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(**init)
    except TypeError as exc:
        missing = [
            p.name for p in signature.parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in init
        ]
        if missing:
            example = " ".join(f"--init {m}=..." for m in missing)
            raise UsageError(
                f"{name}() needs the argument{'s' if len(missing) > 1 else ''} {', '.join(missing)}: "
                f"pass {'them' if len(missing) > 1 else 'it'} with {example}"
            ) from None
        raise UsageError(f"{name}(): {exc}; check the --init arguments") from None


def _build(factory: Callable, name: str, init: dict[str, Any], dtype: torch.dtype) -> nn.Module:
    try:
        model = factory(**init)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"building {name}() raised {_one_line(exc)}; check the --init arguments") from exc
    if not isinstance(model, nn.Module):
        raise UsageError(f"{name}() returned {type(model).__name__}, not an nn.Module")
    return model.to(dtype) if dtype != torch.float32 else model


@contextlib.contextmanager
def _meta_parameters():
    """Parameters and buffers go to meta as they are registered; other tensors stay real (a
    constructor computing widths with `.tolist()`, as regnet does, still works)."""
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter(self, name, param):
        if param is not None and param.device.type != "meta":
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register_parameter(self, name, param)

    def buffer(self, name, tensor, persistent=True):
        if tensor is not None:
            tensor = tensor.to("meta")
        register_buffer(self, name, tensor, persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = parameter, buffer
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


def meta_build(factory: Callable, kwargs: dict[str, Any]) -> tuple[nn.Module, str | None]:
    """Build without allocating weights: under torch.device("meta"), else with only parameters and
    buffers on meta. Returns the model and a note when the second way was needed; raises when
    neither works."""
    try:
        with torch.device("meta"):
            return factory(**kwargs), None
    except Exception as exc:
        first = exc
    with _meta_parameters():
        model = factory(**kwargs)
    return model, f"built with parameters on meta (under torch.device('meta') the constructor failed: {_one_line(first)[:100]})"


def parse_dtype(text: str) -> torch.dtype:
    try:
        return DTYPES[text.lower().removeprefix("torch.")]
    except KeyError:
        raise UsageError(f"unknown --dtype {text!r}; use one of float32, float16, bfloat16, float64") from None


def _as_args(value: Any, where: str) -> tuple:
    if callable(value) and not isinstance(value, torch.Tensor):
        try:
            value = value()
        except Exception as exc:
            raise UsageError(f"{where}() raised {_one_line(exc)}") from exc
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (tuple, list)) and value:
        return tuple(value)
    raise UsageError(f"{where} must give a tensor or a tuple of positional inputs, got {type(value).__name__}")


def example_inputs(spec: ModelSpec, module: ModuleType, obj: Any, path: Path, dtype: torch.dtype) -> tuple:
    if spec.input_shapes:
        generator = torch.Generator().manual_seed(0)
        return tuple(torch.randn(shape, generator=generator, dtype=dtype) for shape in spec.input_shapes)
    if getattr(obj, "example_inputs", None) is not None and not isinstance(obj, nn.Module):
        return _as_args(obj.example_inputs, f"{spec.target}.example_inputs")
    for attr in EXAMPLE_NAMES:
        if hasattr(module, attr):
            return _as_args(getattr(module, attr), f"{path}:{attr}")
    raise UsageError(
        f"no inputs for {spec.target}: pass --input-shape 1,3,224,224 (once per input) "
        f"or define example_inputs() in {path}"
    )


def load(spec: ModelSpec, settings: Settings) -> Loaded:
    path, module, name, obj = resolve(spec.target)
    dtype = parse_dtype(spec.dtype)
    make_inputs = None
    if spec.input_shapes and not settings.latency:  # shapes suffice until something runs the model
        inputs = tuple(torch.empty(shape, dtype=dtype, device="meta") for shape in spec.input_shapes)

        def make_inputs() -> tuple:
            return example_inputs(spec, module, obj, path, dtype)
    else:
        inputs = example_inputs(spec, module, obj, path, dtype)
    if isinstance(obj, nn.Module):
        if spec.init:
            raise UsageError(f"{name} is a module instance: --init applies only to a class or factory")
        notes = []
        if any(p.is_floating_point() and p.dtype != dtype for p in obj.parameters()) and spec.input_shapes:
            obj = copy.deepcopy(obj).to(dtype)  # never change the user's instance
            notes.append(f"analyzed a copy of {name} cast to {dtype}")
        return Loaded(obj, inputs, "given", dtype, notes, make_inputs=make_inputs)
    if not (inspect.isclass(obj) and issubclass(obj, nn.Module)) and not (callable(obj) and not inspect.isclass(obj)):
        raise UsageError(
            f"{name} in {path} is a {type(obj).__name__}, not an nn.Module subclass, "
            "a function returning one, or a module instance"
        )
    _check_arguments(obj, name, spec.init)

    def factory() -> nn.Module:
        return _build(obj, name, spec.init, dtype)

    if settings.latency:
        return Loaded(factory(), inputs, "real", dtype, [], factory, make_inputs)
    try:
        model, note = meta_build(obj, spec.init)
        if not isinstance(model, nn.Module):
            raise TypeError(f"returned {type(model).__name__}")
        notes = [note] if note else []
        return Loaded(model.to(dtype) if dtype != torch.float32 else model, inputs, "meta", dtype, notes, factory,
                      make_inputs)
    except Exception as exc:
        note = f"meta-device build failed ({_one_line(exc)[:120]}); built with real weights"
        return Loaded(factory(), inputs, "real", dtype, [note], factory, make_inputs)
