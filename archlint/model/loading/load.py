"""Resolve `PATH.py:NAME` into a model and example inputs.

NAME may be an `nn.Module` subclass, a function returning a module (both called with the `--init`
keyword arguments), or a module-level instance (used as it is: never changed, never copied).

Inputs: archlint.model.loading.inputs (shapes given, else the target's example_inputs).

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
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from archlint.config import INPUT_DTYPES, ModelSpec, Settings
from archlint.errors import UsageError
from archlint.model.loading import hf
from archlint.model.loading.inputs import bind_inputs, example_inputs
from archlint.model.loading.loaded import Loaded, meta_build, one_line, seeded_build
from archlint.model.runtime.isolate import package_of, search_path
from archlint.model.runtime.walkable import check_walkable
from archlint.suggest import close_name

DTYPES = {
    "float32": torch.float32,
    "float": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "half": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float64": torch.float64,
    "double": torch.float64,
}


def import_file(path: Path) -> ModuleType:
    if path.suffix != ".py" or not path.is_file():
        raise UsageError(f"{path}: no such Python file; give PATH.py:NAME with an existing file")
    resolved = path.resolve()
    name = f"_archlint_target_{resolved.stem}_{hashlib.sha1(str(resolved).encode()).hexdigest()[:8]}"
    package = package_of(resolved)
    if package is not None:  # imported as part of its package: `from .layers import x` resolves there
        name = f"{package[1]}.{name}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    added = search_path(resolved.parent)  # its neighbours, its package's root, the working directory
    sys.path[:0] = added
    sys.modules[name] = module
    try:
        with seeded_build():  # a module-level model gets the same random weights on every run
            spec.loader.exec_module(module)
    except ImportError as exc:
        del sys.modules[name]
        raise UsageError(f"importing {path} failed: {one_line(exc)}; {_import_hint(exc)}") from exc
    except Exception as exc:
        del sys.modules[name]
        raise UsageError(f"importing {path} raised {one_line(exc)}; fix the file") from exc
    except BaseException:  # sys.exit(), Ctrl-C, --timeout (sandbox.user_code words them): not cached half-done
        del sys.modules[name]
        raise
    finally:
        for entry in added:
            with contextlib.suppress(ValueError):  # the file may have edited sys.path (isolate.own_modules restores it)
                sys.path.remove(entry)
    return module


def _import_hint(exc: ImportError) -> str:
    """What to do: a relative import outside a package needs one; a module that is not found may be
    the project's own (run from its root) or a package to install."""
    if "relative import" in str(exc) and "parent package" in str(exc):
        return (
            "the file uses a relative import (from . import ...) but its folder is not a package: add an "
            "__init__.py to it, or import by absolute name"
        )
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (
            f"if {exc.name.partition('.')[0]} is the project's own, run archlint from the folder that holds it; "
            "else install the missing package"
        )
    return "install the missing package or fix the import"


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
            p.name
            for p in signature.parameters.values()
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
        with seeded_build():  # the same random weights on every run (loaded.BUILD_SEED)
            model = factory(**init)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"building {name}() raised {one_line(exc)}; check the --init arguments") from exc
    if not isinstance(model, nn.Module):
        raise UsageError(f"{name}() returned {type(model).__name__}, not an nn.Module")
    return model.to(dtype) if dtype != torch.float32 else model


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


def load(spec: ModelSpec, settings: Settings) -> Loaded:
    dtype = parse_dtype(spec.dtype)
    if spec.model is not None:  # the Python API: the user's own object, never rebuilt or changed
        check_walkable(spec.model, spec.target)
        _real_weights_for_latency(spec.model, spec.target, settings)
        loaded = Loaded(spec.model, (), "given", dtype)
        loaded.inputs, loaded.kwargs = bind_inputs(spec.model, spec.given_args, spec.given_kwargs, "analyze()")
        return loaded
    if spec.target.startswith(hf.PREFIX):
        return hf.load_hf(spec, settings, dtype)
    path, module, name, obj = resolve(spec.target)
    loaded = _load_model(spec, settings, path, name, obj, dtype)
    check_walkable(loaded.model, spec.target)
    if loaded.build == "given":  # a module instance in the file: used as it is
        _real_weights_for_latency(loaded.model, spec.target, settings)
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


def _real_weights_for_latency(model: nn.Module, target: str, settings: Settings) -> None:
    """Timing runs the model: weights on the meta device hold no values to run it with."""
    if settings.latency and any(t.device.type == "meta" for t in itertools.chain(model.parameters(), model.buffers())):
        raise UsageError(
            f"{target}: its weights are on the meta device (no values), and latency runs the model; build it "
            "with real weights (on the CPU, or model.to_empty(device='cpu') and load a state_dict), or leave "
            "latency off: counting needs only shapes"
        )


def _load_model(spec: ModelSpec, settings: Settings, path: Path, name: str, obj: Any, dtype: torch.dtype) -> Loaded:
    inputs: tuple = ()  # set by load() once the model is built
    if isinstance(obj, nn.Module):
        if spec.init:
            raise UsageError(f"{name} is a module instance: --init applies only to a class or factory")
        notes = []
        if any(p.is_floating_point() and p.dtype != dtype for p in obj.parameters()) and (
            spec.input_shapes or spec.keyword_inputs
        ):
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
        note = f"meta-device build failed ({one_line(exc)[:120]}); built with real weights"
        return Loaded(factory(), inputs, "real", dtype, [note], factory)
