"""What keeps the forward analysis fast without changing a figure (benchmarks/analyze_speed.py
measures it): the fx capture copies no parameter values (it never does arithmetic on them), and a
forward that changes one anyway is said, not hidden."""

from __future__ import annotations

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from archlint.model.analyze import analyze_model


class _Clones(TorchFunctionMode):
    """Counts the clones made inside the block of tensors that hold a parameter's values."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.storages = {p.data_ptr() for p in model.parameters()}
        self.parameters = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if (
            func is torch.Tensor.clone
            and args
            and args[0].device.type != "meta"
            and args[0].data_ptr() in self.storages
        ):
            self.parameters += 1
        return func(*args, **(kwargs or {}))


def test_the_fx_capture_copies_no_parameter_values():
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
    with _Clones(net) as clones:
        graph, result = analyze_model(net, (torch.randn(1, 3, 8, 8),))
    assert graph.graph["strategy"] == "fx" and result.totals.flops > 0
    assert clones.parameters == 0  # was: one copy of every parameter (half of a ViT-B's analysis time)


class _Scales(nn.Module):
    """Reads its weight behind the tracer's back (the parameter table) and changes it in place."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            self._parameters["weight"].mul_(2)
        return x * self.weight


def test_a_parameter_the_fx_trace_changes_in_place_is_said():
    net = _Scales()
    _, result = analyze_model(net, (torch.randn(2, 4),))
    assert result.strategy == "fx"
    assert any("changed parameter(s) weight in place" in note for note in result.notes), result.notes


def test_buffers_are_still_put_back_after_the_fx_capture():
    class Counting(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("step", torch.zeros((), dtype=torch.long))
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            self.step += 1
            return self.lin(x)

    net = Counting()
    weight = net.lin.weight.detach().clone()
    _, result = analyze_model(net, (torch.randn(2, 4),))
    assert result.strategy == "fx" and net.step.item() == 0 and torch.equal(net.lin.weight, weight)
    assert not any("in place" in note for note in result.notes)


class _OddAttributes(nn.Module):
    """Attributes module_attrs reads, found every way Python finds them (or not)."""

    dim = 3  # a class constant

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("p", None)  # a table entry holding None: hasattr says yes, and None is kept
        self.register_parameter("bias", None)
        self.mode = "nearest"

    @property
    def stride(self):  # a property that raises AttributeError: hasattr says no
        raise AttributeError("no stride")


class _OwnGetattr(nn.Linear):
    def __getattr__(self, name):  # attributes made up on the fly: only hasattr can find them
        return 4 if name == "num_heads" else super().__getattr__(name)


def test_module_attributes_are_found_as_hasattr_finds_them_without_asking_for_each():
    from archlint.model.capture import module_attrs

    assert module_attrs(_OddAttributes()) == {"p": None, "mode": "nearest", "dim": 3, "bias": False}
    assert list(module_attrs(_OddAttributes())) == ["p", "mode", "dim", "bias"]  # _MODULE_ATTRS' order
    assert module_attrs(_OwnGetattr(2, 3)) == {"in_features": 2, "out_features": 3, "num_heads": 4, "bias": True}
    lstm = module_attrs(nn.LSTM(4, 8, 2))
    assert lstm["bias"] is True and lstm["hidden_size"] == 8 and lstm["num_layers"] == 2


def test_the_fx_capture_copies_no_input():
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
    x = torch.randn(1, 3, 32, 32)
    clones = _Clones(net)
    clones.storages = {x.data_ptr()}
    with clones:
        graph, _ = analyze_model(net, (x,))
    assert graph.graph["strategy"] == "fx"
    assert clones.parameters == 0  # was: one copy of the input, read for its shape only


def _meta_layouts():
    """Meta tensors in the layouts a forward makes: standard (size-1 dims included), channels_last,
    permuted, sliced, expanded; float32 and bfloat16."""
    found = []
    for shape in [(2, 3, 4, 5), (1, 8, 1, 1), (1, 1, 5, 5), (3, 1), (7,), (2, 0, 3), (1, 3, 2, 2)]:
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.empty(shape, dtype=dtype, device="meta")
            found.append(x)
            if x.dim() == 4:
                found.append(torch.empty(shape, dtype=dtype, device="meta", memory_format=torch.channels_last))
            if x.dim() >= 2:
                found.append(x.transpose(0, 1))
                found.append(x[:, : max(1, x.shape[1] // 2)])
                found.append(torch.empty(shape[1:], dtype=dtype, device="meta").expand(shape))
    return found


def test_the_fast_shape_rules_give_what_the_meta_kernels_give():
    """_like (empty_like) and _fast_cat (cat) skip the meta decompositions; the tensors they make
    match the kernels' in shape, dtype and strides (later ops' layouts and views depend on them)."""
    from archlint.model.capture import meta_shapes

    def same(a, b):
        return a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride() and a.device == b.device

    layouts = _meta_layouts()
    for x in layouts:
        assert same(meta_shapes.like(x), torch.empty_like(x)), (x.shape, x.stride())
    joined = 0
    for x in layouts:
        for y in layouts:
            for dim in range(-x.dim(), x.dim()):
                try:
                    want = torch.cat([x, y], dim)
                except RuntimeError:
                    continue
                got = meta_shapes.cat(([x, y], dim), {})
                assert got is None or same(got, want), (x.shape, x.stride(), y.shape, y.stride(), dim)
                joined += got is not None
    assert joined > 50  # the rule took the common cases
    pooled = 0
    for x in layouts + [torch.empty(2, 3, 4, 5, 6, device="meta"), torch.empty(2, 1, 1, 1, device="meta")]:
        for size in (1, 2, (3, None), (None, None), (2, 2, 2), (0, 1)):
            dims = 3 if isinstance(size, tuple) and len(size) == 3 else 2
            pool = torch.nn.functional.adaptive_avg_pool3d if dims == 3 else torch.nn.functional.adaptive_avg_pool2d
            try:
                want = pool(x, size)
            except (RuntimeError, ValueError, TypeError, IndexError):
                assert meta_shapes.adaptive_avg_pool(x, size, dims, none_is_input=True) is None
                continue
            got = meta_shapes.adaptive_avg_pool(x, size, dims, none_is_input=True)
            assert got is None or same(got, want), (x.shape, x.stride(), size)
            pooled += got is not None
    assert pooled > 20


def test_the_op_order_is_sorted_once_and_follows_a_graph_that_changes():
    import networkx as nx

    from archlint.model import opgraph

    g = nx.DiGraph()
    for name, kind in (("x", "input"), ("a", "conv"), ("b", "activation"), ("out", "output")):
        g.add_node(name, kind=kind)
    g.add_edges_from([("x", "a"), ("a", "b"), ("b", "out")])
    assert [n for n, _ in opgraph.ops(g)] == ["a", "b"]
    assert opgraph._order(g) is opgraph._order(g)  # one sort for every caller
    g.add_node("c", kind="add")
    g.add_edges_from([("x", "c"), ("c", "a")])
    assert [n for n, _ in opgraph.ops(g)] == ["c", "a", "b"]


def test_the_attention_rule_gives_what_multihead_attention_gives_on_meta():
    from archlint.model.capture import meta_shapes

    def same(a, b):
        if a is None or b is None:
            return a is b
        return a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()

    covered = 0
    for batch_first in (True, False):
        for kdim in (None, 12):
            mha = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first, kdim=kdim, vdim=kdim).to("meta")
            kv_dim = kdim or 16
            for n, tgt, src in ((1, 5, 5), (2, 3, 7), (3, 1, 1)):

                def shaped(length, dim):
                    return torch.empty((n, length, dim) if batch_first else (length, n, dim), device="meta")

                q, k = shaped(tgt, 16), shaped(src, kv_dim)
                for extra in ({}, {"need_weights": False}, {"average_attn_weights": False}):
                    for keys in ((q, k, k), (q, k, shaped(src, kv_dim))):
                        with torch.no_grad():
                            want = mha(*keys, **extra)
                        got = meta_shapes.attention(mha, keys, extra)
                        assert got is not None and same(got[0], want[0]) and same(got[1], want[1]), (
                            batch_first,
                            kdim,
                            n,
                            tgt,
                            src,
                            extra,
                        )
                        covered += 1
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).to("meta")
    q = torch.empty(2, 5, 16, device="meta")
    mask = torch.zeros(5, 5, dtype=torch.bool, device="meta")
    assert meta_shapes.attention(mha, (q, q, q), {"attn_mask": mask}) is None  # masks: the kernel's
    assert meta_shapes.attention(mha, (q[0], q[0], q[0]), {}) is None  # unbatched: the kernel's
    assert meta_shapes.attention(mha, (q, q[:, :, :8], q), {}) is None  # a wrong key: the kernel's own error
    assert covered == 72


def test_a_leaf_kernel_that_fails_leaves_its_weights_in_place_and_says_where():
    import pytest

    from archlint.model.capture import CaptureFailed, capture

    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Conv1d(5, 2, 1))  # the Conv1d gets a 2-D (1, 144)
    weights = {name: t for name, t in [*net.named_parameters(), *net.named_buffers()]}
    with pytest.raises(CaptureFailed) as failed:
        capture(net, (torch.randn(1, 3, 8, 8),), "fx")
    assert "op _2 in module '2' given input shapes [[1, 144]]" in str(failed.value)
    assert "While executing" in str(failed.value)  # as fx.Interpreter worded it (the report's details quote it)
    now = dict([*net.named_parameters(), *net.named_buffers()])
    assert now.keys() == weights.keys() and all(now[k] is t and t.device.type == "cpu" for k, t in weights.items())


def test_the_conv_rule_gives_what_the_module_gives_on_meta():
    """meta_shapes.conv (issue 45) skips the module's call on meta weights: the same shape, dtype and
    strides as the module run on meta, over strides, paddings, dilations, groups, layouts and dtypes;
    where the kernel rejects the input the rule gives None (the kernel then raises its own error)."""
    from archlint.model.capture import meta_shapes

    made = 0
    for dims, conv in ((1, nn.Conv1d), (2, nn.Conv2d), (3, nn.Conv3d)):
        for stride, padding, dilation, groups in ((1, 0, 1, 1), (2, 1, 1, 1), (3, 2, 2, 2), (1, 0, 1, 4), (2, 3, 1, 2)):
            module = conv(4, 8, 3, stride=stride, padding=padding, dilation=dilation, groups=groups).to("meta")
            for size in (1, 2, 5, 9):
                for channels in (4, 3):
                    for dtype in (torch.float32, torch.bfloat16):
                        x = torch.empty(2, channels, *(size,) * dims, dtype=dtype, device="meta")
                        for given in (x, x.to(memory_format=torch.channels_last) if dims == 2 else x.transpose(0, 1)):
                            got = meta_shapes.conv(module, (given,))
                            try:
                                want = module(given)
                            except (RuntimeError, ValueError):
                                assert got is None, (dims, stride, padding, dilation, groups, size, channels)
                                continue
                            if got is not None:
                                assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
                                made += 1
    assert made > 50  # the rule took the common cases
    same = nn.Conv2d(4, 4, 3, padding="same").to("meta")
    assert meta_shapes.conv(same, (torch.empty(1, 4, 8, 8, device="meta"),)) is None  # left to the kernel
    unbatched = torch.empty(4, 8, 8, device="meta")
    assert meta_shapes.conv(nn.Conv2d(4, 4, 3).to("meta"), (unbatched,)) is None


def test_the_fx_capture_makes_its_graph_module_only_when_asked():
    """The fx capture's Replay makes its GraphModule (a copy of the module tree, 3 ms of a DenseNet's
    analysis) at first use (issue 45): --latency's timing gets one that runs as the model does."""
    from unittest import mock

    import torch.fx as fx

    from archlint.model.capture import capture

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2)).eval()
    x = torch.randn(1, 3, 6, 6)
    model(x)  # the lazy layer takes its shape
    made = []
    init = fx.GraphModule.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    with mock.patch.object(fx.GraphModule, "__init__", counted):
        graph, replay = capture(model, (x,), "fx")
        assert made == [] and replay is not None and graph.graph["replay"] is replay
        gm = replay.graph_module
        assert made == [1] and replay.graph_module is gm  # made once
    assert torch.equal(gm(x), model(x))
    assert {n for n, _ in gm.named_parameters()} == {n for n, _ in model.named_parameters()}


def test_the_builders_parameter_and_buffer_names_are_torchs():
    """GraphBuilder.named_tensors reads the tables of the modules it found once (issue 45): the same
    names, tensors and order as named_parameters()/named_buffers(), tied weights and shared modules
    listed once, under their first name; a class with its own named_parameters() keeps it."""
    from archlint.model.capture.graph import GraphBuilder

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(5, 4)
            self.block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
            self.again = self.block  # a shared module
            self.head = nn.Linear(4, 5, bias=False)
            self.head.weight = self.embed.weight  # a tied weight
            self.register_buffer("empty", None)

    class Own(Tied):
        def named_parameters(self, *args, **kwargs):
            yield "only", self.head.weight

    for model in (Tied(), Own()):
        b = GraphBuilder(model)
        for table, torchs in (("_parameters", model.named_parameters), ("_buffers", model.named_buffers)):
            ours, theirs = b.named_tensors(table), list(torchs())
            assert [n for n, _ in ours] == [n for n, _ in theirs]
            assert all(a is c for (_, a), (_, c) in zip(ours, theirs))
