"""Cost of each op: FLOPs (multiply-adds), MAC (bytes, ShuffleNetV2) and output bytes.

Two small tables do the work, the way `torch.utils.flop_counter` registers one formula per op:

- `KIND_OF` maps a normalized op key (a torch.nn class name such as "Conv2d", or a function /
  method / aten base name such as "relu", "add", "conv2d") to its kind (see opgraph.KINDS).
- `FORMULAS` maps a kind to one small function `f(op) -> flops`.

MAC is the same rule for every kind (ShuffleNetV2: every element read once, every element written
once): input bytes + parameter/buffer bytes + output bytes. Views ("reshape", "split") cost 0;
"creation" only writes; "dropout" is the identity in eval (0).

Conventions (FLOPs = multiply-adds, as fvcore and torchvision's `_ops`):
conv/linear/matmul/attention count one per multiply-add; norms follow fvcore (BatchNorm in eval
2 per element with affine, 1 without; in training and Layer/Group/InstanceNorm 5 with affine, 4
without); element-wise ops and activations count 1 per output element; pooling counts one per
element of each pooling window (adaptive pooling: one per input element, as fvcore); upsampling
1 (nearest) or 4 (linear modes) per output element, as fvcore. An op whose kind has no formula
gets known=False: it is listed as unknown and left out of the totals, never counted as 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import networkx as nx

_KINDS: dict[str, tuple[str, ...]] = {
    "conv": (
        "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d LazyConv2d "
        "LazyConv3d conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d "
        "convolution _convolution conv_tbc"
        " ConvReLU1d ConvReLU2d ConvReLU3d"  # torch.ao.nn.intrinsic's fused quantized conv + ReLU: one op
    ).split(),
    "linear": "Linear LazyLinear NonDynamicallyQuantizableLinear linear addmm LinearReLU".split(),
    "matmul": "matmul mm bmm baddbmm addbmm einsum _grouped_mm grouped_mm grouped_mm_fallback".split(),
    "attention": (
        "MultiheadAttention scaled_dot_product_attention _scaled_dot_product_attention_math "
        "_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_efficient_attention "
        "_scaled_dot_product_flash_attention"
    ).split(),
    "recurrent": "LSTM GRU RNN LSTMCell GRUCell RNNCell".split(),
    "norm": (
        "BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm LayerNorm GroupNorm InstanceNorm1d "
        "InstanceNorm2d InstanceNorm3d RMSNorm LocalResponseNorm batch_norm layer_norm group_norm "
        "instance_norm rms_norm native_batch_norm _native_batch_norm_legit_no_training "
        "_native_batch_norm_legit native_layer_norm native_group_norm local_response_norm normalize "
        "_weight_norm _weight_norm_interface weight_norm"
    ).split(),
    "activation": (
        "ReLU ReLU6 LeakyReLU PReLU RReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Hardswish "
        "Hardsigmoid Hardtanh Hardshrink Softshrink Softplus Softsign Softmax Softmax2d LogSoftmax "
        "Softmin GLU Threshold Tanhshrink LogSigmoid relu relu6 leaky_relu prelu rrelu elu selu celu "
        "gelu silu mish sigmoid tanh hardswish hardsigmoid hardtanh hardshrink softshrink softplus "
        "softsign softmax log_softmax _softmax _log_softmax softmin glu threshold tanhshrink "
        "logsigmoid log_sigmoid"
    ).split(),
    "elementwise": (
        "add sub subtract rsub mul multiply div divide truediv floordiv floor_divide neg negative pow "
        "sqrt rsqrt exp exp2 expm1 log log2 log10 log1p abs clamp clamp_min clamp_max clip maximum "
        "minimum where eq ne lt gt le ge and or xor not invert erf erfc sin cos tan sinh cosh atan "
        "atan2 addcmul addcdiv lerp masked_fill sign floor ceil round trunc frac reciprocal square "
        "fmod remainder mod bitwise_and bitwise_or bitwise_xor bitwise_not logical_and logical_or "
        "logical_not logical_xor isinf isnan isfinite nan_to_num heaviside hypot sigmoid_ "
        "matmul_elementwise"
    ).split(),
    "pool": (
        "MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d "
        "AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d "
        "LPPool1d LPPool2d max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d "
        "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d "
        "adaptive_max_pool2d adaptive_max_pool3d max_pool2d_with_indices max_pool1d_with_indices "
        "max_pool3d_with_indices _adaptive_avg_pool2d _adaptive_avg_pool3d lp_pool1d lp_pool2d "
        "roi_align ps_roi_align roi_pool ps_roi_pool"
    ).split(),
    "concat": "cat concat concatenate stack hstack vstack dstack column_stack".split(),
    "split": "split chunk unbind split_with_sizes tensor_split unsafe_split hsplit vsplit".split(),
    "reshape": (
        "Identity Flatten Unflatten view reshape reshape_as flatten unflatten squeeze unsqueeze permute "
        "transpose t T mT H expand expand_as view_as narrow select slice getitem movedim moveaxis "
        "swapaxes swapdims alias detach as_strided diagonal real unfold broadcast_to _unsafe_view "
        "squeeze_ unsqueeze_ lift_fresh_copy meshgrid data dropout_identity numpy_T matrix_H adjoint broadcast_tensors"
    ).split(),
    "copy": (
        "contiguous clone to type float half double bfloat16 int long bool repeat tile copy flip "
        "roll pad constant_pad_nd index_select gather index masked_select repeat_interleave "
        "ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d "
        "ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d "
        "CircularPad1d CircularPad2d CircularPad3d reflection_pad1d reflection_pad2d "
        "reflection_pad3d replication_pad1d replication_pad2d replication_pad3d PixelShuffle "
        "PixelUnshuffle pixel_shuffle pixel_unshuffle ChannelShuffle channel_shuffle "
        "native_channel_shuffle scatter scatter_add _to_copy setitem index_put tril triu "
        "clone_ cpu cuda float32 contiguous_ masked_scatter im2col type_as one_hot"
    ).split(),
    "reduction": (
        "sum mean amax amin max min argmax argmin prod std var norm logsumexp all any cumsum cumprod "
        "topk sort argsort var_mean std_mean linalg_vector_norm median count_nonzero col2im "
        "nms unique unique_consecutive unique_dim _unique _unique2 bincount histc nonzero argwhere"
        # a loss: one pass over the prediction (cross_entropy: log_softmax, then a gather and a mean)
        " cross_entropy cross_entropy_loss nll_loss nll_loss_forward nll_loss2d_forward nll_loss_nd mse_loss"
        " l1_loss smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div"
        " CrossEntropyLoss NLLLoss MSELoss L1Loss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss KLDivLoss"
    ).split(),
    # Reads of a tensor's value by the host (.item(), .tolist(), .numpy(), `if t:`): a copy to host memory.
    "sync": "item _local_scalar_dense tolist numpy is_nonzero".split(),
    "embedding": "Embedding EmbeddingBag embedding embedding_bag".split(),
    "dropout": (
        "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout dropout dropout1d "
        "dropout2d dropout3d feature_dropout alpha_dropout feature_alpha_dropout native_dropout "
        "stochastic_depth drop_path drop_block2d drop_block3d"
    ).split(),
    "upsample": (
        "Upsample UpsamplingNearest2d UpsamplingBilinear2d interpolate upsample upsample_nearest1d "
        "upsample_nearest2d upsample_nearest3d upsample_linear1d upsample_bilinear2d "
        "upsample_trilinear3d upsample_bicubic2d _upsample_bilinear2d_aa _upsample_bicubic2d_aa "
        "grid_sample grid_sampler grid_sampler_2d affine_grid_generator _upsample_nearest_exact1d "
        "_upsample_nearest_exact2d _upsample_nearest_exact3d"
    ).split(),
    "creation": (
        "zeros ones empty full arange rand randn randint zeros_like ones_like empty_like full_like "
        "rand_like randn_like randint_like tensor as_tensor linspace logspace scalar_tensor new_zeros "
        "new_ones new_full new_empty new_tensor eye empty_strided zero fill"
    ).split(),
}
KIND_OF: dict[str, str] = {key: kind for kind, keys in _KINDS.items() for key in keys}

# torch.nn classes that are one op each ("leaf modules"): capture records them whole, whatever
# the tracer, so every strategy gives the same ops. Other modules are traced through.
LEAF_MODULES = frozenset(k for k in KIND_OF if k[:1].isupper())

_DUNDER = re.compile(r"^__[ir]?(\w+?)__$")


def normalize(name: str) -> str:
    """'__iadd__' → 'add', 'relu_' → 'relu', 'add.Tensor' → 'add'; class names stay as they are."""
    name = name.split(".")[0] if "." in name and not name[:1].isupper() else name
    m = _DUNDER.match(name)
    if m:
        name = m.group(1)
        name = {"truediv": "div", "floordiv": "floordiv", "matmul": "matmul"}.get(name, name)
    elif name.endswith("_") and not name.startswith("_") and len(name) > 1:
        name = name[:-1]
    return name


def kind_of(key: str) -> str:
    return KIND_OF.get(key, "other")


def numel(shape) -> int:
    return math.prod(shape) if shape is not None else 0


def _weight(op: dict) -> tuple | None:
    ps = op.get("param_shapes") or {}
    for name in ("weight", "in_proj_weight", "weight_orig"):  # weight_orig: under the old spectral_norm hook
        if name in ps:
            return ps[name]
    if len(ps.get("weight_v") or ()) >= 2:  # the old weight_norm hook: weight = g · v / ‖v‖ (its own op)
        return ps["weight_v"]
    for name, shape in ps.items():  # functional call reading a named parameter
        if name.rsplit(".", 1)[-1] == "weight":
            return shape
    ins = op.get("in_shapes") or []
    return ins[1] if len(ins) > 1 else None


def _out(op: dict) -> tuple:
    outs = op.get("out_shapes") or [()]
    return outs[0]


def registrar(table: dict[str, Callable], what: str) -> Callable:
    """A decorator that files one function under each name it is given, in `table`. A name filed
    twice is an error at import, as in torch.utils.flop_counter: two formulas for one op cannot
    both be the one that counts."""

    def for_names(*names: str):
        def register(fn):
            for name in names:
                if name in table:
                    raise ValueError(f"{what} for {name!r} registered twice: {table[name].__name__} and {fn.__name__}")
                table[name] = fn
            return fn

        return register

    return for_names


FORMULAS: dict[str, Callable[[dict], int]] = {}
formula = registrar(FORMULAS, "cost formula")


@formula("conv")
def conv(op: dict) -> int:
    """batch · prod(weight) · prod(out spatial); transposed: prod(in spatial) instead."""
    w, x, out = _weight(op), op["in_shapes"][0], _out(op)
    if w is None:  # never a silent 0: the op is listed as unknown
        raise ValueError("no weight tensor to count (packed or renamed)")
    spatial_dims = len(w) - 2
    if op["attrs"].get("transposed"):
        spatial = x[-spatial_dims:]
    else:
        spatial = out[-spatial_dims:]
    batch = numel(out[: len(out) - spatial_dims - 1])  # unbatched conv input has no batch dim
    return batch * numel(w) * numel(spatial)


@formula("linear")
def linear(op: dict) -> int:
    """out elements · in_features (addmm: m · n · k)."""
    if op["key"] == "addmm":  # addmm(bias, mat1, mat2): any of them may be a parameter
        _, a, b = _operands(op, 3)
        return a[0] * a[1] * b[1]
    w = _weight(op)
    in_features = w[-1] if w else op["in_shapes"][0][-1]
    return numel(_out(op)) * in_features


@formula("matmul")
def matmul(op: dict) -> int:
    if op["key"] == "einsum":
        return _einsum(op)
    if op["key"] in ("baddbmm", "addbmm"):
        _, a, b = _operands(op, 3)
        return numel(a[:-1]) * a[-1] * b[-1]  # addbmm sums over the batch: its output has no batch dim
    a = _operands(op, 2)[0]
    k = a[-1] if a else 1  # a 1-D first operand is a vector: its only dim is the contraction
    return numel(_out(op)) * k


def _einsum(op: dict) -> int:
    """Multiply-adds of a two-operand contraction: the product of every index's size."""
    equation = str(op["attrs"].get("equation", "")).replace(" ", "")
    lhs = equation.split("->")[0].split(",")
    if len(lhs) != len(op["in_shapes"]) or "." in equation:
        return numel(_out(op))  # ellipsis: fall back to output size (documented estimate)
    sizes: dict[str, int] = {}
    for letters, shape in zip(lhs, op["in_shapes"]):
        for letter, size in zip(letters, shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    return math.prod(sizes.values())


def _operands(op: dict, count: int) -> list[tuple]:
    """The first `count` tensor operands in signature order: from the shapes capture recorded by
    argument position (attrs["operands"]; parameters and repeated tensors included), else from
    in_shapes. A missing operand raises: the op is then reported as unknown, never guessed."""
    recorded = op["attrs"].get("operands")
    shapes = [tuple(s) for s in recorded[:count]] if recorded else list(op["in_shapes"][:count])
    if len(shapes) < count or any(s is None for s in shapes):
        raise ValueError(f"{op['key']}: {count} tensor operands expected, shapes known for {len(shapes)}")
    return shapes


@formula("attention")
def attention(op: dict) -> int:
    """QKᵀ and AV: L·S·E + L·S·Ev per batch·head; nn.MultiheadAttention adds its projections.

    Exact for every kernel choice (math, flash, memory-efficient), as torch's FlopCounterMode
    counts them: grouped-query attention (fewer key/value heads) costs per query head, and a causal
    mask (`is_causal` or a mask tensor) does not reduce the count: the math and efficient kernels
    compute the whole L×S score matrix (a flash kernel skips about half of it: then an upper bound).
    """
    if op["key"] == "MultiheadAttention":
        return _multihead(op)
    q, k, v = _operands(op, 3)
    batch = numel(q[:-2])
    return batch * q[-2] * k[-2] * (q[-1] + v[-1])


def _multihead(op: dict) -> int:
    """nn.MultiheadAttention: q/k/v/out projections plus L·S·E twice. Capture may list a tensor passed
    as several of query/key/value once (self-attention), and masks may come first (export lists
    inputs in the order its kernels read them): the query is the first input of the highest rank
    whose last dim is embed_dim; the key the next input of that rank whose last dim is kdim, else
    the query; the value likewise."""
    a = op["attrs"]
    e = a["embed_dim"]
    ins = [tuple(s) for s in op["in_shapes"]]
    rank = max(len(s) for s in ins if s and s[-1] == e)
    qi = next(i for i, s in enumerate(ins) if len(s) == rank and s[-1] == e)
    q, rest = ins[qi], [s for s in ins[qi + 1 :] if len(s) == rank]
    kdim, vdim = a.get("kdim") or e, a.get("vdim") or e
    ki = next((i for i, s in enumerate(rest) if s[-1] == kdim), None)
    k = q if ki is None else rest[ki]
    after = rest[ki + 1 :] if ki is not None else []
    v = next((s for s in after if s[-1] == vdim and s[:-1] == k[:-1]), k)
    if len(q) == 2:  # unbatched (L, E)
        n, lq, ls = 1, q[0], k[0]
    elif a.get("batch_first", False):
        n, lq, ls = q[0], q[1], k[1]
    else:
        n, lq, ls = q[1], q[0], k[0]
    projections = n * (lq * q[-1] * e + ls * kdim * e + ls * v[-1] * e + lq * e * e)
    return projections + n * lq * ls * e * 2


@formula("norm")
def norm(op: dict) -> int:
    x = numel(op["in_shapes"][0]) if op["in_shapes"] else 0
    affine = bool(op["attrs"].get("affine", True))
    batchnorm = "atch" in op["key"] or op["key"] in ("native_batch_norm",)
    if batchnorm and op.get("mode", "eval") == "eval":
        return x * (2 if affine else 1)
    return x * (5 if affine else 4)


@formula("elementwise", "activation")
def elementwise(op: dict) -> int:
    return sum(numel(s) for s in op["out_shapes"])


@formula("reduction")
def reduction(op: dict) -> int:
    return numel(op["in_shapes"][0]) if op["in_shapes"] else 0


@formula("pool")
def pool(op: dict) -> int:
    kernel = op["attrs"].get("kernel_size")
    if kernel is None or "adaptive" in op["key"].lower():
        return numel(op["in_shapes"][0])
    out = _out(op)
    if isinstance(kernel, int):
        kernel = (kernel,) * (3 if "3d" in op["key"] else 2 if "2d" in op["key"] else 1)
    return numel(out) * numel(kernel)


# Input points read per output element, by interpolation mode (fvcore: nearest 1, bilinear 4).
_POINTS = {"nearest": 1, "nearest-exact": 1, "linear": 2, "bilinear": 4, "trilinear": 8, "bicubic": 16}
_POINTS_OF_KEY = {
    "upsample_linear1d": 2,
    "upsample_bilinear2d": 4,
    "upsample_trilinear3d": 8,
    "upsample_bicubic2d": 16,
    "_upsample_bilinear2d_aa": 4,
    "_upsample_bicubic2d_aa": 16,
    "UpsamplingBilinear2d": 4,
    "grid_sample": 4,
    "grid_sampler": 4,
    "grid_sampler_2d": 4,
}


@formula("upsample")
def upsample(op: dict) -> int:
    """One per input point each output element interpolates (nearest 1, linear 2, bilinear 4,
    trilinear 8, bicubic 16); "area" is adaptive average pooling: one per input element."""
    mode = op["attrs"].get("mode")
    if mode == "area":
        return numel(op["in_shapes"][0])
    points = _POINTS.get(str(mode)) if mode is not None else _POINTS_OF_KEY.get(op["key"], 1)
    if points is None:  # an unlisted mode: the key decides (grid_sample's "bilinear" is listed)
        points = _POINTS_OF_KEY.get(op["key"], 1)
    return numel(_out(op)) * points


_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# Element-wise work per hidden unit per step, one per element op (the convention above):
# LSTM: gate sums 4 + activations 4 + c = f·c + i·g 3 + tanh(c) 1 + o·tanh(c) 1 = 13;
# GRU: r, z sums and sigmoids 4 + n = tanh(x_n + r·h_n) 3 + h = (1 - z)·n + z·h 4 = 11;
# RNN: sum + tanh/relu = 2.
_ELEMENTWISE_PER_UNIT = {"LSTM": 13, "GRU": 11, "RNN": 2}


@formula("recurrent")
def recurrent(op: dict) -> int:
    """nn.LSTM/GRU/RNN and their cells: every step multiplies its input and hidden state by the
    weight matrices (weight_ih, weight_hh, the projection weight_hr) of every layer and direction,
    so the multiply-adds are (tokens = input elements / input_size) × Σ weight elements, whatever
    the layout (batch_first, unbatched, packed); plus the gates' element-wise work per hidden unit.
    """
    ps = op.get("param_shapes") or {}
    weights = {n: s for n, s in ps.items() if n.rsplit(".", 1)[-1].startswith(("weight_ih", "weight_hh", "weight_hr"))}
    first = next((s for n, s in weights.items() if n.rsplit(".", 1)[-1] in ("weight_ih", "weight_ih_l0")), None)
    if first is None or not op["in_shapes"]:  # never a silent 0: the op is listed as unknown
        raise ValueError("no weight_ih tensor to count (packed or renamed)")
    tokens = numel(op["in_shapes"][0]) // first[1]
    cell = op["key"].removesuffix("Cell")
    hidden = first[0] // _GATES[cell]
    directions = sum(1 for n in weights if n.rsplit(".", 1)[-1].startswith("weight_ih"))  # layers × directions
    return tokens * (sum(numel(s) for s in weights.values()) + directions * hidden * _ELEMENTWISE_PER_UNIT[cell])


@formula("embedding")
def embedding(op: dict) -> int:
    """A lookup: no arithmetic, except EmbeddingBag's sum/mean/max over each bag's rows."""
    if op["key"].lower() != "embeddingbag" and op["key"] != "embedding_bag":
        return 0
    return numel(op["in_shapes"][0]) * _out(op)[-1]


@formula("concat", "split", "reshape", "copy", "creation", "sync")
def no_arithmetic(op: dict) -> int:
    return 0


@formula("dropout")
def dropout(op: dict) -> int:
    return 0 if op.get("mode", "eval") == "eval" else numel(_out(op))


def _embedding_mac(op: dict) -> int:
    """Indices read, the looked-up rows read (not the whole table), the output written."""
    dim = _out(op)[-1] if _out(op) else 0
    rows = numel(op["in_shapes"][0]) * dim * op.get("itemsize", 4) if op["in_shapes"] else 0
    table = op.get("param_bytes", 0)
    in_bytes = op["in_bytes"]
    if not table and len(op["in_shapes"]) > 1:  # F.embedding(indices, weight): the table came as an input
        in_bytes -= numel(op["in_shapes"][1]) * op.get("itemsize", 4)
    return in_bytes + rows + op["out_bytes"]


# Formulas for one op key, where its kind's formula does not fit (checked before FORMULAS).
KEY_FORMULAS: dict[str, Callable[[dict], int]] = {}
key_formula = registrar(KEY_FORMULAS, "cost formula of an op key")


@key_formula("_weight_norm", "_weight_norm_interface", "weight_norm")
def weight_norm(op: dict) -> int:
    """w = g · v / ‖v‖ recomputed from the parameters on every call (torch.nn.utils.weight_norm,
    parametrizations.weight_norm: wav2vec2's positional conv): per element of v a square and an
    add for the norm, a divide and a multiply."""
    return 4 * numel(_out(op))


@key_formula("roi_align", "ps_roi_align")
def roi_align(op: dict) -> int:
    """Each output bin averages sampling_ratio² bilinear samples of 4 points each. An adaptive
    ratio (≤ 0: ceil(box size / bins), known only from the boxes' values) is counted as one
    sample per bin: a lower bound, as torchvision's detection heads set the ratio (2)."""
    ratio = op["attrs"].get("sampling_ratio")
    samples = ratio * ratio if isinstance(ratio, int) and ratio > 0 else 1
    return numel(_out(op)) * samples * 4


@key_formula("roi_pool", "ps_roi_pool")
def roi_pool(op: dict) -> int:
    """A max over each bin: bin sizes depend on the boxes' values; counted as one per output
    element (a lower bound)."""
    return numel(_out(op))


@key_formula("nms")
def nms(op: dict) -> int:
    """Sorts the N boxes and compares each kept box with the rest: at most N·(N-1)/2 IoUs (an
    upper bound: how many boxes suppression removes early depends on the values)."""
    n = op["in_shapes"][0][0] if op["in_shapes"] and op["in_shapes"][0] else 0
    return n * (n - 1) // 2


def mac_bytes(op: dict) -> int:
    kind = op["kind"]
    if kind in ("reshape", "split") or (kind == "dropout" and op.get("mode", "eval") == "eval"):
        return 0
    out = op["out_bytes"]
    if kind == "creation":
        return out
    if kind == "embedding":
        return _embedding_mac(op)
    if op.get("key") == "setitem" and op.get("in_shapes"):  # x[a:b] = v: v read and written, x untouched elsewhere
        return 2 * numel(op["in_shapes"][-1]) * op.get("itemsize", 4)
    return op["in_bytes"] + op.get("param_bytes", 0) + out  # a tensor passed twice is read once


def cost_graph(graph: nx.DiGraph) -> list[str]:
    """Set flops, mac_bytes, out_bytes and known on every op node; return the unknown ops' names."""
    mode = graph.graph.get("mode", "eval")
    unknown = []
    for name, op in graph.nodes(data=True):
        if op["kind"] in ("input", "output"):
            continue
        op["out_bytes"] = sum(numel(s) for s in op["out_shapes"]) * op.get("itemsize", 4)
        fn = KEY_FORMULAS.get(op["key"]) or FORMULAS.get(op["kind"])
        if fn is None:
            op["known"], op["flops"], op["mac_bytes"] = False, 0, 0
            unknown.append(name)
            continue
        op["mode"] = mode  # formulas read it (norm, dropout); not a node attribute
        try:
            op["known"] = True
            op["flops"] = int(fn(op))
            op["mac_bytes"] = int(mac_bytes(op))
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            # The formula cannot apply to this call (operands it needs are not known): the op is
            # unknown, listed as such and left out of the totals, rather than an internal error.
            op["known"], op["flops"], op["mac_bytes"] = False, 0, 0
            op["unknown_reason"] = f"{type(exc).__name__}: {exc}"
            unknown.append(name)
        finally:
            del op["mode"]
        if op["known"] and _noop_cast(graph, name, op):
            op["mac_bytes"], op["noop"] = 0, True
    return unknown


_CASTS = frozenset({"to", "type", "float", "half", "double", "bfloat16", "type_as", "float32"})


def _noop_cast(graph: nx.DiGraph, name: str, op: dict) -> bool:
    """`x.to(torch.float32)` on a float32 x returns x itself: no copy, no traffic. Only a cast to
    the input's own dtype and shape, with no layout or device asked for."""
    if op["key"] not in _CASTS or op["kind"] != "copy":
        return False
    attrs = op.get("attrs") or {}
    if any(k in attrs for k in ("memory_format", "device", "copy")) or len(op.get("in_shapes") or []) < 1:
        return False
    preds = sorted(graph.predecessors(name), key=lambda p: graph.edges[p, name].get("index", 0))
    if not preds or graph.edges[preds[0], name].get("index", 0) != 0:
        return False
    source = graph.nodes[preds[0]]
    return source.get("dtype") == op.get("dtype") and list(op["in_shapes"][0]) == list(op["out_shapes"][0])


# The same operand readers, public for the backward formulas (archlint.model.train.backward).
weight_shape, operand_shapes, output_shape, multihead = _weight, _operands, _out, _multihead
