"""The standard speed-ups, each a function from a Variant (a model, its inputs and how it is
called) to a new Variant, or NotApplicable with the reason. A transformation that changes the
model works on a deep copy of the variant's model: the baseline (and the user's model, which the
baseline is a copy of) is never touched. They compose in the order of names.NAMES."""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from archlint.model.speedups.fold import fold_bn
from archlint.whatif_names import NAMES


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


class NotApplicable(Exception):
    """The transformation does not apply to this model or device; str() is the reason."""


@dataclass(frozen=True)
class Variant:
    """One way to run the model: the module, its inputs (on the device), the autocast dtype (None:
    off) and the grad mode (inference_mode or no_grad). `applied` names the transformations."""

    model: nn.Module
    inputs: tuple
    device: torch.device
    autocast: torch.dtype | None = None
    inference_mode: bool = False
    compiled: bool = False
    applied: tuple[str, ...] = ()
    detail: str = ""  # what was done, in words ("12 pairs folded (fx graph)")
    first_s: float = 0.0  # seconds of its first call, once made (for compile: the compilation)
    kwargs: dict = field(default_factory=dict)  # keyword-only inputs (on the device)

    def __call__(self):
        grad = torch.inference_mode() if self.inference_mode else torch.no_grad()
        cast = torch.autocast(self.device.type, dtype=self.autocast) if self.autocast else nullcontext()
        with grad, cast:
            return self.model(*self.inputs, **self.kwargs)

    def with_(self, name: str, detail: str = "", **changes) -> Variant:
        details = "; ".join(d for d in (self.detail, detail) if d)
        return replace(self, applied=(*self.applied, name), detail=details, **changes)


def _float_dtype(model: nn.Module) -> torch.dtype:
    return next((p.dtype for p in (*model.parameters(), *model.buffers()) if p.is_floating_point()), torch.float32)


def _has(model: nn.Module, *types: type) -> bool:
    return any(isinstance(m, types) for m in model.modules())


def _refuse(why: str | None) -> None:
    if why is not None:
        raise NotApplicable(why)


def _autocast_refused(dtype: torch.dtype) -> Callable[[Variant], str | None]:
    def refused(v: Variant) -> str | None:
        if v.autocast is not None:
            return "another autocast dtype is already applied"
        if dtype == torch.float16 and v.device.type != "cuda":
            return "fp16 autocast is for CUDA; on CPU autocast runs bf16 (see bf16)"
        if v.device.type not in ("cpu", "cuda"):
            return f"autocast is not supported on {v.device.type}"
        if dtype == torch.bfloat16 and v.device.type == "cuda" and not torch.cuda.is_bf16_supported():
            return f"{torch.cuda.get_device_name(v.device)} has no bf16 support"
        if _float_dtype(v.model) != torch.float32:
            return f"the model already runs in {str(_float_dtype(v.model)).removeprefix('torch.')}"
        if _has(v.model, torch.ao.nn.quantized.dynamic.Linear, torch.ao.nn.quantized.dynamic.LSTM):
            return "the layers autocast would run in lower precision are already int8"
        return None

    return refused


def _autocast(dtype: torch.dtype) -> Callable[[Variant], Variant]:
    name = "bf16" if dtype == torch.bfloat16 else "fp16"
    check = _autocast_refused(dtype)

    def apply(v: Variant) -> Variant:
        _refuse(check(v))
        return v.with_(
            name, f"torch.autocast({v.device.type!r}, dtype=torch.{str(dtype).removeprefix('torch.')})", autocast=dtype
        )

    return apply


def _channels_last_refused(v: Variant) -> str | None:
    if not _has(v.model, nn.Conv2d):
        return "no 2-D convolution: channels_last changes only how 4-D conv activations are laid out"
    if not any(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (*v.inputs, *v.kwargs.values())):
        return "no 4-D input to lay out as channels_last"
    return None


def channels_last(v: Variant) -> Variant:
    _refuse(_channels_last_refused(v))
    model = copy.deepcopy(v.model).to(memory_format=torch.channels_last)

    def last(t):
        return t.contiguous(memory_format=torch.channels_last) if isinstance(t, torch.Tensor) and t.dim() == 4 else t

    return v.with_(
        "channels-last",
        "model and 4-D inputs in torch.channels_last",
        model=model,
        inputs=tuple(last(t) for t in v.inputs),
        kwargs={k: last(t) for k, t in v.kwargs.items()},
    )


def _fold_refused(v: Variant) -> str | None:
    if v.compiled:
        return "the model is already compiled"
    if not _has(v.model, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
        return "no BatchNorm layer"
    return None


def fold(v: Variant) -> Variant:
    _refuse(_fold_refused(v))
    if v.kwargs:
        raise NotApplicable(
            f"keyword-only inputs ({', '.join(v.kwargs)}): the fx trace it needs takes positional inputs only"
        )
    model, pairs, where = fold_bn(copy.deepcopy(v.model), v.inputs)
    if not pairs:
        raise NotApplicable(f"no BatchNorm directly after a Conv or Linear that feeds only it (searched the {where})")
    return v.with_("fold-bn", f"{pairs} pair{'s' if pairs > 1 else ''} folded ({where})", model=model)


def sdpa(v: Variant) -> Variant:
    if v.compiled:
        raise NotApplicable("the model is already compiled")
    if v.kwargs:
        raise NotApplicable(
            f"keyword-only inputs ({', '.join(v.kwargs)}): the fx trace it needs takes positional inputs only"
        )
    from archlint.model.speedups.sdpa import replace_attention

    try:
        model, found = replace_attention(copy.deepcopy(v.model), v.inputs)
    except Exception as exc:  # fx cannot trace the model: the pattern cannot be looked for
        raise NotApplicable(f"fx could not trace the model to look for attention: {first_line(exc)}") from None
    if not found:
        raise NotApplicable("no hand-written attention (softmax(q @ kᵀ · scale) @ v) in the fx graph")
    return v.with_(
        "sdpa",
        f"{found} hand-written attention{'s' if found > 1 else ''} replaced by F.scaled_dot_product_attention",
        model=model,
    )


def _int8_refused(v: Variant) -> str | None:
    if v.device.type != "cpu":
        return "torch.ao dynamic quantization runs on CPU only"
    if not _has(v.model, nn.Linear, nn.LSTM):
        return "no nn.Linear or nn.LSTM layer to quantize"
    if _float_dtype(v.model) != torch.float32:
        return (
            "dynamic quantization converts float32 layers; the model runs in "
            f"{str(_float_dtype(v.model)).removeprefix('torch.')}"
        )
    if v.autocast is not None:
        return "autocast is already applied"
    return None


def int8_dynamic(v: Variant) -> Variant:
    _refuse(_int8_refused(v))
    import warnings

    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

    # only the layers the forward runs: one it never calls (an unused head) changes nothing timed
    ran, built = _called(v, (nn.Linear, nn.LSTM))
    if not ran:
        raise NotApplicable(f"none of the {built} nn.Linear/nn.LSTM layers runs in forward")
    with warnings.catch_warnings():  # torch.ao's deprecation notices: the result is what we time
        warnings.simplefilter("ignore")
        model = quantize_dynamic(
            copy.deepcopy(v.model), {name: default_dynamic_qconfig for name in ran}, dtype=torch.qint8
        )
    n = sum(
        isinstance(m, (torch.ao.nn.quantized.dynamic.Linear, torch.ao.nn.quantized.dynamic.LSTM))
        for m in model.modules()
    )
    unused = f"; {built - len(ran)} more never run in forward, left as they are" if built > len(ran) else ""
    return v.with_(
        "int8-dynamic",
        f"{n} Linear/LSTM layer{'s' if n != 1 else ''} that run{'s' if n == 1 else ''} quantized to int8 "
        f"(torch.ao quantize_dynamic, {torch.backends.quantized.engine} engine){unused}",
        model=model,
    )


def _called(v: Variant, types: tuple[type, ...]) -> tuple[list[str], int]:
    """The paths of the modules of `types` that one call of the variant runs, in call order, and
    how many such modules it holds."""
    ran: list[str] = []
    found = [(name, m) for name, m in v.model.named_modules() if isinstance(m, types)]
    handles = [m.register_forward_hook(lambda _m, _i, _o, name=name: ran.append(name)) for name, m in found]
    try:
        v()
    finally:
        for h in handles:
            h.remove()
    return list(dict.fromkeys(ran)), len(found)


def inference_mode(v: Variant) -> Variant:
    return v.with_("inference-mode", "torch.inference_mode() instead of torch.no_grad()", inference_mode=True)


def compile_(v: Variant) -> Variant:
    if v.device.type == "cpu":  # inductor compiles C++ for the CPU: find the compiler it would use
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler
        except ImportError:  # a torch that moved its internals: the first compiled call says what fails
            get_cpp_compiler = None
        try:
            if get_cpp_compiler is not None:
                get_cpp_compiler()
        except (ImportError, AttributeError):  # the probe itself no longer fits this torch: same as above
            pass
        except Exception as exc:  # inductor raises its own error types for a missing compiler
            raise NotApplicable(f"torch.compile on CPU needs a C++ compiler: {first_line(exc)}") from None
    import torch._dynamo

    torch._dynamo.reset()  # a fresh cache: earlier compiles of the same forward must not count against its limit
    return v.with_(
        "compile",
        "torch.compile, default backend (inductor); compile time is the first call",
        model=torch.compile(v.model),
        compiled=True,
    )


# The checks a transformation makes before any work (a look at the model's layers, dtype and
# device): `refused` runs them alone, so the what-ifs' estimate leaves out the ones that will not
# run. The others (sdpa's fx trace, fold-bn's pairs, int8's called layers) are known only by trying.
CHEAP_CHECKS: dict[str, Callable[[Variant], str | None]] = {
    "fold-bn": _fold_refused,
    "channels-last": _channels_last_refused,
    "int8-dynamic": _int8_refused,
    "bf16": _autocast_refused(torch.bfloat16),
    "fp16": _autocast_refused(torch.float16),
}


def refused(name: str, v: Variant) -> str | None:
    """Why transformation `name` will not apply to `v`, from its checks that cost nothing; None when
    they pass (it may still turn out not to apply once tried)."""
    check = CHEAP_CHECKS.get(name)
    return check(v) if check else None


ORDER: dict[str, Callable[[Variant], Variant]] = {
    "fold-bn": fold,
    "sdpa": sdpa,
    "channels-last": channels_last,
    "int8-dynamic": int8_dynamic,
    "bf16": _autocast(torch.bfloat16),
    "fp16": _autocast(torch.float16),
    "inference-mode": inference_mode,
    "compile": compile_,
}
assert tuple(ORDER) == NAMES, "names.NAMES lists every transformation, in the order applied"
