"""Describing a call: the attributes of a leaf module or a functional call, and the readable label
and normalized key of a called function, method or aten op."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from archlint.model.cost import normalize

_MODULE_ATTRS = (
    "in_channels out_channels kernel_size stride padding dilation groups output_padding "
    "in_features out_features num_heads embed_dim kdim vdim batch_first num_features "
    "normalized_shape num_groups affine elementwise_affine output_size inplace p mode "
    "scale_factor upscale_factor num_embeddings embedding_dim dim "
    "input_size hidden_size num_layers bidirectional proj_size nonlinearity"
).split()
_LOOKED_UP = frozenset((*_MODULE_ATTRS, "bias"))  # module_attrs reads these, when the module has them

# Positional names of the non-tensor arguments of functional calls whose attributes checks read.
_POSITIONAL = {
    "conv1d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv2d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv3d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv_transpose1d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose2d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose3d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "convolution": (
        "input",
        "weight",
        "bias",
        "stride",
        "padding",
        "dilation",
        "transposed",
        "output_padding",
        "groups",
    ),
    "_convolution": (
        "input",
        "weight",
        "bias",
        "stride",
        "padding",
        "dilation",
        "transposed",
        "output_padding",
        "groups",
    ),
    "einsum": ("equation",),
    "max_pool1d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool2d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool3d": ("input", "kernel_size", "stride", "padding", "dilation"),
    "max_pool2d_with_indices": ("input", "kernel_size", "stride", "padding", "dilation"),
    "avg_pool1d": ("input", "kernel_size", "stride", "padding"),
    "avg_pool2d": ("input", "kernel_size", "stride", "padding"),
    "avg_pool3d": ("input", "kernel_size", "stride", "padding"),
    "interpolate": ("input", "size", "scale_factor", "mode"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias"),
    "group_norm": ("input", "num_groups", "weight", "bias"),
    # torchvision's ops, as torch.ops.torchvision.* take them (dispatch and export both see these)
    "roi_align": ("input", "rois", "spatial_scale", "pooled_height", "pooled_width", "sampling_ratio", "aligned"),
    "ps_roi_align": ("input", "rois", "spatial_scale", "pooled_height", "pooled_width", "sampling_ratio"),
    "nms": ("boxes", "scores", "iou_threshold"),
}
_SIMPLE = (int, float, bool, str, type(None))

# Tensor operands whose shapes the cost formulas need, by signature position and name, whether the
# tensor came from an activation or a parameter (`torch.addmm(self.bias, x, self.weight)`) and even
# when one tensor is passed several times (`F.scaled_dot_product_attention(x, x, x)`): capture
# lists each producer's tensor once and parameters apart, so `in_shapes` alone cannot say which is which.
_SDPA = ("query", "key", "value", "attn_mask")
_OPERANDS = {
    "scaled_dot_product_attention": _SDPA,
    "_scaled_dot_product_attention_math": _SDPA,
    "_scaled_dot_product_flash_attention_for_cpu": ("query", "key", "value"),
    "_scaled_dot_product_flash_attention": ("query", "key", "value"),
    "_scaled_dot_product_efficient_attention": ("query", "key", "value", "attn_bias"),
    "addmm": ("input", "mat1", "mat2"),
    "baddbmm": ("input", "batch1", "batch2"),
    "addbmm": ("input", "batch1", "batch2"),
    "mm": ("input", "mat2"),
    "bmm": ("input", "mat2"),
    "matmul": ("input", "other"),
    "_grouped_mm": ("input", "mat2"),  # mixture-of-experts: (tokens, K) × (experts, K, N) → tokens·K·N
    "grouped_mm_fallback": ("input", "weight"),  # transformers' custom op for the same
}


# Calls that hand a tensor's value to Python (`.item()`, `if t:`, `int(t)`): the host waits for the
# device to finish all the work queued before it (a sync) and the value leaves the graph. By the
# called function's name, with the cost-table key the recorded op gets (kind "sync").
HOST_READS = {
    "item": "item",
    "_local_scalar_dense": "item",
    "tolist": "tolist",
    "numpy": "numpy",
    "__bool__": "is_nonzero",
    "is_nonzero": "is_nonzero",
    "__int__": "item",
    "__float__": "item",
    "__index__": "item",
    "__complex__": "item",
}
# Ops whose output size depends on the input's values: the host reads a count before it can
# allocate the output (a sync on a GPU; a graph break for torch.compile and CUDA graphs).
DATA_DEPENDENT = frozenset(
    "nonzero argwhere masked_select unique unique_consecutive unique_dim _unique _unique2 bincount".split()
)
SYNC_REASONS = ("value read by the host", "data-dependent output size", "boolean-mask indexing", "copy to the host")


def host_sync(key: str, args: tuple, kwargs: dict) -> str | None:
    """Why a call that returns tensors makes the host wait for the device (one of SYNC_REASONS), or None."""
    if key in DATA_DEPENDENT:
        return SYNC_REASONS[1]
    if key == "where" and len(args) == 1 and not kwargs:  # torch.where(cond) is nonzero(cond, as_tuple=True)
        return SYNC_REASONS[1]
    if key == "repeat_interleave" and kwargs.get("output_size") is None:
        # tensor repeats (`repeat_interleave(x, counts)`, or `repeat_interleave(counts)` alone):
        # the output length is their sum
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats", args[0] if args else None)
        if isinstance(repeats, torch.Tensor):
            return SYNC_REASONS[1]
    if key in ("getitem", "setitem", "index", "index_put") and len(args) > 1 and _bool_index(args[1]):
        return SYNC_REASONS[2]  # x[mask] / x[mask] = v: a nonzero under the hood
    if key == "cpu" or (key == "to" and "cpu" in [a for a in (*args[1:], kwargs.get("device")) if isinstance(a, str)]):
        return SYNC_REASONS[3]  # only a literal "cpu": `.to(x.device)` is on the device when the model is
    return None


def _bool_index(index: Any) -> bool:
    items = index if isinstance(index, (list, tuple)) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in items)


def _simple(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, _SIMPLE) for v in value)
    return isinstance(value, _SIMPLE) or isinstance(value, (torch.dtype, torch.memory_format))


_ON_CLASS: dict[type, frozenset[str] | None] = {}


def _on_class(cls: type) -> frozenset[str] | None:
    """The names module_attrs looks up that a module class defines itself (properties, class
    constants), or None when the class looks attributes up its own way (a `__getattr__` or
    `__getattribute__` of its own): then only hasattr can say which it has. Once per class."""
    if cls not in _ON_CLASS:
        own_lookup = (
            getattr(cls, "__getattr__", None) is not nn.Module.__getattr__
            or getattr(cls, "__getattribute__", None) is not object.__getattribute__
        )
        _ON_CLASS[cls] = (
            None if own_lookup else frozenset(a for a in _LOOKED_UP if any(a in vars(k) for k in cls.__mro__))
        )
    return _ON_CLASS[cls]


def _present(module: nn.Module) -> frozenset[str]:
    """The names module_attrs looks up that the module has: what `hasattr` says, found in the
    instance's and its class's dicts and nn.Module's tables, without the AttributeError that
    nn.Module.__getattr__ builds for each missing one (most of them, on every module)."""
    on_class = _on_class(type(module))
    if on_class is None:
        return frozenset(a for a in _LOOKED_UP if hasattr(module, a))
    d = module.__dict__
    in_dict = _LOOKED_UP.intersection(d) - on_class  # a class's property wins over the instance dict
    maybe = set(on_class)
    for table in ("_parameters", "_buffers", "_modules"):
        maybe.update(_LOOKED_UP.intersection(d.get(table, ())))
    return frozenset(in_dict | {a for a in maybe - in_dict if hasattr(module, a)})


def module_attrs(module: nn.Module) -> dict[str, Any]:
    present = _present(module)
    attrs = {a: getattr(module, a) for a in _MODULE_ATTRS if a in present}
    attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in attrs.items() if _simple(v)}
    if isinstance(module, nn.modules.conv._ConvNd):
        attrs["transposed"] = module.transposed
    if isinstance(module, (nn.RNNBase, nn.RNNCellBase)):  # `bias` is a flag there, not a tensor
        attrs["bias"] = bool(module.bias)
    elif "bias" in present and not isinstance(module, nn.MultiheadAttention):
        attrs["bias"] = isinstance(module.bias, torch.Tensor)
    if "elementwise_affine" in attrs:
        attrs["affine"] = attrs.pop("elementwise_affine")
    return attrs


def call_attrs(key: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Attributes of a functional call: its non-tensor arguments, named where the signature is known."""
    names = _POSITIONAL.get(key, ())
    attrs: dict[str, Any] = {}
    for i, value in enumerate(args):
        if i < len(names):
            name = names[i]
            if name in ("weight",) and key in ("batch_norm", "layer_norm", "group_norm"):
                attrs["affine"] = value is not None
            elif name == "bias" and key.startswith(("conv", "_conv")):
                attrs["bias"] = value is not None
            elif _simple(value):
                attrs[name] = list(value) if isinstance(value, tuple) else value
    for name, value in kwargs.items():
        if _simple(value):
            attrs[name] = list(value) if isinstance(value, tuple) else value
    if key.startswith("conv_transpose"):
        attrs["transposed"] = True
    if key in _OPERANDS:
        attrs["operands"] = _operand_shapes(_OPERANDS[key], args, kwargs)
    attrs.pop("input", None)
    if (reason := host_sync(key, args, kwargs)) is not None:
        attrs["host_sync"] = reason
    if key in ("permute", "transpose", "swapaxes", "swapdims") and (dims := _permutation(key, args, kwargs)):
        attrs["dims"] = dims
    return {k: (str(v) if isinstance(v, (torch.dtype, torch.memory_format)) else v) for k, v in attrs.items()}


def _permutation(key: str, args: tuple, kwargs: dict) -> list[int] | None:
    """The output's dims as input dims (`permute`'s argument; `transpose(1, 2)` on a 4-D tensor is
    [0, 2, 1, 3]), non-negative, or None when the call's arguments are not plain ints."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor):
        return None
    rank, rest = x.dim(), args[1:]
    if key == "permute":
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else rest or kwargs.get("dims")
    else:
        pair = list(rest[:2]) + [kwargs.get(k) for k in ("dim0", "dim1")[len(rest[:2]) :]]
        if not all(isinstance(d, int) for d in pair) or rank == 0:
            return None
        dims = list(range(rank))
        a, b = (d % rank for d in pair)
        dims[a], dims[b] = dims[b], dims[a]
    if not isinstance(dims, (list, tuple)) or len(dims) != rank or not all(isinstance(d, int) for d in dims):
        return None
    return [d % rank for d in dims]


def _operand_shapes(names: tuple[str, ...], args: tuple, kwargs: dict) -> list[list[int] | None]:
    """Shapes of the named tensor operands, in signature order (None where absent or not a tensor)."""
    values = [args[i] if i < len(args) else kwargs.get(name) for i, name in enumerate(names)]
    return [list(v.shape) if isinstance(v, torch.Tensor) else None for v in values]


def function_label(fn: Any) -> tuple[str, str]:
    """(readable label, normalized key) of a called function, method or aten op."""
    if isinstance(fn, str):  # fx call_method
        return f"Tensor.{fn}", normalize(fn)
    if isinstance(fn, torch._ops.OpOverload):
        return str(fn), normalize(fn._opname)
    if fn is torch.nn.functional.unfold or fn is torch.nn.functional.fold:  # im2col/col2im, not the view
        return f"F.{fn.__name__}", {"unfold": "im2col", "fold": "col2im"}[fn.__name__]
    name = getattr(fn, "__name__", None) or str(fn)
    if name == "__get__":  # a Tensor property (x.T, x.shape) seen by the torch-function mode
        name = getattr(getattr(fn, "__self__", None), "__name__", name)
    owner = getattr(fn, "__objclass__", None)
    module = getattr(fn, "__module__", None) or ""
    if owner in (torch.Tensor, torch._C.TensorBase) or (owner is None and module == "" and hasattr(torch.Tensor, name)):
        label = f"Tensor.{name}"
    elif module in ("torch.nn.functional", "torch._C._nn"):
        label = f"F.{name}"
    elif module == "torch" or module.startswith("torch."):
        label = f"torch.{name}"
    elif module in ("_operator", "operator"):
        label = f"operator.{name}"
    else:
        label = f"{module}.{name}" if module else name
    return label, normalize(name)
