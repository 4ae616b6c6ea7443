"""Resolve `PATH.py:NAME` into a model and example inputs.

NAME may be an `nn.Module` subclass, a function returning a module (both called with the `--init`
keyword arguments), or a module-level instance (used as it is: never changed, never copied).

Inputs, in this order of preference:
  1. `--input-shape SHAPE[:DTYPE]` (one per positional input) and `--input NAME=SHAPE[:DTYPE]`
     (keyword inputs), or the same in `[[tool.archlint.models]]`: random tensors. Float inputs
     are normal samples in `--dtype`; integer inputs are token ids drawn uniformly from [0, V),
     V the smallest `nn.Embedding` of the model (so every lookup is in range; 2 without one);
     boolean inputs, and integer inputs whose name contains "mask", are all ones (attend everywhere);
  2. an `example_inputs` attribute of the target itself (e.g. a staticmethod of the class);
  3. in the target file, a function `example_inputs()` or an attribute `EXAMPLE_INPUTS`:
     a tensor, a tuple/list of positional arguments, a dict of keyword arguments, or a pair
     `(args, kwargs)`.
Keyword inputs are bound to `forward`'s signature: those that are positional parameters become
positional arguments (skipped parameters get their defaults), so every capture strategy can run
them; only keyword-only ones (or ones caught by `**kwargs`) stay keywords.

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

from archlint.config import INPUT_DTYPES, InputSpec, ModelSpec, Settings
from archlint.errors import UsageError
from archlint.suggest import close_name

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
    kwargs: dict[str, Any] = field(default_factory=dict)  # keyword-only inputs (see bind_inputs)
    # Real inputs, made only when a strategy or measurement runs the model (`inputs` and `kwargs`
    # hold meta placeholders until then: a 1×3×20000×20000 input costs nothing to count).
    make_inputs: Callable[[], tuple[tuple, dict[str, Any]]] | None = None

    @property
    def on_meta(self) -> bool:
        return any(t.device.type == "meta" for t in _state(self.model))

    def real_inputs(self) -> tuple:
        """The positional inputs as real tensors (made now if they were placeholders); `kwargs` too."""
        if self.make_inputs is not None:
            (self.inputs, self.kwargs), self.make_inputs = self.make_inputs(), None
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
        with contextlib.suppress(ValueError):  # the file may have edited sys.path (isolate.own_modules restores it)
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
        functions = [k for k, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == module.__name__]
        close = close_name(name, found + [f for f in functions if not f.startswith("_")])
        if close:
            hint = f"; did you mean {file}:{close}?"
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
        pass
    if text.lower().removeprefix("torch.") in INPUT_DTYPES:
        raise UsageError(
            f"--dtype {text} is for the weights and float inputs (float32, float16, bfloat16, float64); "
            f"give integer or boolean inputs with --input-dtype {text} or per input, e.g. --input-shape 1,128:{text}"
        )
    raise UsageError(f"unknown --dtype {text!r}; use one of float32, float16, bfloat16, float64")


def token_range(model: nn.Module) -> int:
    """Integer inputs are drawn from [0, V): V the smallest embedding table, so every lookup is valid."""
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]
    return min(sizes) if sizes else 2


def random_input(
    spec: InputSpec, name: str, default: str | None, dtype: torch.dtype, vocab: int, generator, meta: bool = False
) -> torch.Tensor:
    """A tensor for one input given by shape (rules in the module docstring); with `meta`, a
    placeholder of the same shape and dtype that allocates nothing."""
    kind = getattr(torch, spec.dtype or default) if (spec.dtype or default) else dtype
    if meta:
        return torch.empty(spec.shape, dtype=kind, device="meta")
    if kind == torch.bool or (not kind.is_floating_point and "mask" in name.lower()):
        return torch.ones(spec.shape, dtype=kind)
    if kind.is_floating_point:
        return torch.randn(spec.shape, generator=generator, dtype=kind)
    return torch.randint(0, vocab, spec.shape, generator=generator, dtype=kind)


def _as_inputs(value: Any, where: str) -> tuple[tuple, dict[str, Any]]:
    """What an example_inputs() gave: a tensor, a tuple/list, a dict, or (args, kwargs)."""
    if callable(value) and not isinstance(value, torch.Tensor):
        try:
            value = value()
        except Exception as exc:
            raise UsageError(f"{where}() raised {_one_line(exc)}") from exc
    if isinstance(value, torch.Tensor):
        return (value,), {}
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        return (), dict(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], (tuple, list)) and isinstance(value[1], dict):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)) and value:
        return tuple(value), {}
    raise UsageError(
        f"{where} must give a tensor, a tuple of positional inputs, a dict of keyword inputs or "
        f"(args, kwargs), got {type(value).__name__}"
    )


def example_inputs(
    spec: ModelSpec, module: ModuleType, obj: Any, path: Path, dtype: torch.dtype, model: nn.Module,
    meta: bool = False,
) -> tuple[tuple, dict[str, Any]]:
    if spec.input_shapes or spec.keyword_inputs:
        generator = torch.Generator().manual_seed(0)
        vocab = token_range(model)
        names = _positional_names(model)
        args = tuple(
            random_input(
                InputSpec(shape, spec.input_dtypes[i] if i < len(spec.input_dtypes) else None),
                names[i] if i < len(names) else "", spec.input_dtype, dtype, vocab, generator, meta,
            )
            for i, shape in enumerate(spec.input_shapes)
        )
        kwargs = {
            name: random_input(i, name, spec.input_dtype, dtype, vocab, generator, meta)
            for name, i in spec.keyword_inputs.items()
        }
        return args, kwargs
    if getattr(obj, "example_inputs", None) is not None and not isinstance(obj, nn.Module):
        return _as_inputs(obj.example_inputs, f"{spec.target}.example_inputs")
    for attr in EXAMPLE_NAMES:
        if hasattr(module, attr):
            return _as_inputs(getattr(module, attr), f"{path}:{attr}")
    raise UsageError(
        f"no inputs for {spec.target}: pass --input-shape 1,3,224,224 (once per input; 1,128:int64 for "
        f"token ids), --input NAME=SHAPE[:DTYPE] for keyword inputs, or define example_inputs() in {path}"
    )


def _forward_parameters(model: nn.Module) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None


def _positional_names(model: nn.Module) -> list[str]:
    params = _forward_parameters(model) or []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def bind_inputs(model: nn.Module, args: tuple, kwargs: dict[str, Any], source: str) -> tuple[tuple, dict[str, Any]]:
    """Check the inputs against forward's signature; keyword inputs that name positional parameters
    become positional arguments, the parameters skipped before them their defaults. Returns the
    positional arguments and the keyword-only rest."""
    params = _forward_parameters(model)
    if params is None:
        return args, kwargs
    kind = inspect.Parameter
    positional = [p for p in params if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == kind.VAR_POSITIONAL for p in params)
    varkw = any(p.kind == kind.VAR_KEYWORD for p in params)
    owner = f"{type(model).__name__}.forward"
    takes = ", ".join(p.name for p in params if p.kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)) or "nothing"
    if len(args) > len(positional) and not varargs:
        raise UsageError(
            f"{len(args)} positional inputs given with {source}, but {owner} takes {len(positional)} "
            f"({', '.join(p.name for p in positional) or 'none'}); drop the extra {source}"
            + ("" if not positional else " or give inputs by name with --input NAME=SHAPE[:DTYPE]")
        )
    names = {p.name for p in params}
    for name in kwargs:
        if name not in names and not varkw:
            raise UsageError(f"keyword input {name!r}: {owner} has no such parameter; it takes {takes}")
        if name in [p.name for p in positional[: len(args)]]:
            raise UsageError(f"input {name!r} is given both by position and by name; give it once")
    index = {p.name: i for i, p in enumerate(positional)}
    last = max((index[n] for n in kwargs if n in index), default=-1)
    if last < len(args):
        return args, kwargs
    filled = list(args)
    for p in positional[len(args): last + 1]:
        if p.name in kwargs:
            filled.append(kwargs[p.name])
        elif p.default is not p.empty:
            filled.append(p.default)
        else:
            raise UsageError(f"{owner} needs its input {p.name!r}: give it with --input {p.name}=SHAPE[:DTYPE]")
    rest = {k: v for k, v in kwargs.items() if k not in index}
    return tuple(filled), rest


def load(spec: ModelSpec, settings: Settings) -> Loaded:
    dtype = parse_dtype(spec.dtype)
    if spec.model is not None:  # the Python API: the user's own object, never rebuilt or changed
        loaded = Loaded(spec.model, (), "given", dtype)
        loaded.inputs, loaded.kwargs = bind_inputs(spec.model, spec.given_args, spec.given_kwargs, "analyze()")
        return loaded
    if spec.target.startswith("hf:"):
        from archlint.model.hf import load_hf

        return load_hf(spec, settings, dtype)
    path, module, name, obj = resolve(spec.target)
    loaded = _load_model(spec, settings, path, name, obj, dtype)
    given = spec.input_shapes or spec.keyword_inputs
    source = spec.inputs_source if given else f"example_inputs() of {spec.target}"

    def inputs(meta: bool = False) -> tuple[tuple, dict[str, Any]]:
        # after the model: integer inputs are drawn from the range of its embeddings
        args, kwargs = example_inputs(spec, module, obj, path, dtype, loaded.model, meta)
        return bind_inputs(loaded.model, args, kwargs, source)

    if given and not settings.latency:  # shapes suffice until something runs the model
        loaded.inputs, loaded.kwargs = inputs(meta=True)
        loaded.make_inputs = inputs
    else:
        loaded.inputs, loaded.kwargs = inputs()
    return loaded


def _load_model(spec: ModelSpec, settings: Settings, path: Path, name: str, obj: Any, dtype: torch.dtype) -> Loaded:
    inputs: tuple = ()  # set by load() once the model is built
    if isinstance(obj, nn.Module):
        if spec.init:
            raise UsageError(f"{name} is a module instance: --init applies only to a class or factory")
        notes = []
        if any(p.is_floating_point() and p.dtype != dtype for p in obj.parameters()) and (spec.input_shapes or spec.keyword_inputs):
            obj = copy.deepcopy(obj).to(dtype)  # never change the user's instance
            notes.append(f"analyzed a copy of {name} cast to {dtype}")
        return Loaded(obj, inputs, "given", dtype, notes)
    if not (inspect.isclass(obj) and issubclass(obj, nn.Module)) and not (callable(obj) and not inspect.isclass(obj)):
        raise UsageError(
            f"{name} in {path} is a {type(obj).__name__}, not an nn.Module subclass, "
            "a function returning one, or a module instance"
        )
    _check_arguments(obj, name, spec.init)

    def factory() -> nn.Module:
        return _build(obj, name, spec.init, dtype)

    if settings.latency:
        return Loaded(factory(), inputs, "real", dtype, [], factory)
    try:
        model, note = meta_build(obj, spec.init)
        if not isinstance(model, nn.Module):
            raise TypeError(f"returned {type(model).__name__}")
        notes = [note] if note else []
        return Loaded(model.to(dtype) if dtype != torch.float32 else model, inputs, "meta", dtype, notes, factory)
    except Exception as exc:
        note = f"meta-device build failed ({_one_line(exc)[:120]}); built with real weights"
        return Loaded(factory(), inputs, "real", dtype, [note], factory)
