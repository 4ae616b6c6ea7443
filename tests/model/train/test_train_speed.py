"""What keeps `--train` within 2x of the forward analysis without changing a number
(benchmarks/train_speed.py measures it): the memory model runs with the cyclic collector off."""

import copy
import functools
import gc
import types

import torch
import torch.nn as nn

import archlint
from archlint.model.train import memory


def test_memory_model_runs_with_the_cyclic_collector_off(monkeypatch):
    seen = []
    real = memory.step_memory

    def watching(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(memory, "step_memory", watching)
    enabled = gc.isenabled()
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    result = archlint.analyze(net, torch.randn(4, 8), train=True, quiet=True).to_dict()["models"][0]
    assert seen == [False]
    assert gc.isenabled() == enabled  # given back
    # and the step's storages are still freed as they die (by reference counts): the activations
    # kept for backward are only the ReLU's output, the output the loop's `out` keeps and the loss,
    # not every temporary
    assert result["memory"]["activations_bytes"] == (4 * 16 + 4 * 4 + 1) * 4


def test_input_values_are_copied_on_one_thread(monkeypatch, two_threads):
    """The inputs' real values are copied with ATen on one thread, when first read (values._Borrowed):
    a parallel copy's threads wait on each other for milliseconds on a busy machine."""
    from archlint.model.train import values as values_mod

    threads_seen = []
    real_copy = values_mod._copy_to_cpu
    monkeypatch.setattr(
        values_mod, "_copy_to_cpu", lambda real: threads_seen.append(torch.get_num_threads()) or real_copy(real)
    )
    net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4))
    x, meta = torch.randn(4, 8), memory.to_meta(net)
    meta_x = torch.empty_like(x, device="meta")
    values = memory._input_values(net, meta, ((x,), {}), ((meta_x,), {}))
    assert len(values.values._items) == 4 and threads_seen == []  # the input and 3 buffers, none copied yet
    known = [meta_x, *meta.buffers()]
    read = [values.values[m] for m in known]
    assert threads_seen == [1, 1, 1, 1] and torch.get_num_threads() == 2  # each copied once; threads given back
    assert [values.values[m] for m in known] == read  # (kept: not copied again)
    assert all(torch.equal(v, r) for v, r in zip(read, [x, *net.buffers()]))


def test_a_start_value_is_copied_only_when_read(monkeypatch):
    """values.KnownValues.know_all keeps each start value uncopied until an op reads it: a BatchNorm's
    running statistics, written by its first op, are dropped unread (two of a ResNet's three buffers a
    layer); its counter's `+= 1` waits for a read of the count (none here), which would copy it and
    add on the copy."""
    from archlint.model.train import values as values_mod

    copied = []
    real_copy = values_mod._copy_to_cpu
    monkeypatch.setattr(values_mod, "_copy_to_cpu", lambda real: copied.append(real) or real_copy(real))
    net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4))
    result = memory.step_memory(net, (torch.randn(4, 8),), optimizer="sgd")
    norm = net[1]
    assert copied == []  # not the input, not the statistics, not the counter
    assert norm.num_batches_tracked.item() == 0  # the real counter untouched
    assert result["peak_bytes"] > 0


class _Shares(nn.Module):
    """A module tree with what a copy must keep: a child reached twice, modules in a plain list, a
    tensor attribute, a non-empty hook dict, a class that copies itself its own way."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.again = self.conv
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.plain_list = [self.blocks[0], {"x": 1}]
        self.register_buffer("running", torch.zeros(4))
        self.table = torch.arange(3)
        self.own = _OwnCopy()
        self.settings = {"size": (1, 2), "names": ["a", "b"]}
        self.register_forward_hook(lambda *_: None)


class _OwnCopy(nn.Module):
    def __deepcopy__(self, memo):
        return _OwnCopy()


def _walk_pair(a, b, pairs: dict, originals: set) -> None:
    """Check that `a` (the fast copy) and `b` (deepcopy's) are the same object graph."""
    if id(a) in pairs:
        assert pairs[id(a)] is b
        return
    assert type(a) is type(b)
    pairs[id(a)] = b
    assert (id(a) in originals) == (id(b) in originals)  # shared with the original alike
    if isinstance(a, torch.Tensor):
        assert (a.shape, a.dtype, a.device, a.requires_grad) == (b.shape, b.dtype, b.device, b.requires_grad)
    elif isinstance(a, nn.Module):
        _walk_pair(vars(a), vars(b), pairs, originals)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _walk_pair(a[k], b[k], pairs, originals)
    elif isinstance(a, (list, tuple, set)):
        assert len(a) == len(b)
        for x, y in zip(
            sorted(a, key=repr) if isinstance(a, set) else a, sorted(b, key=repr) if isinstance(b, set) else b
        ):
            _walk_pair(x, y, pairs, originals)
    elif isinstance(a, functools.partial):
        _walk_pair((a.func, a.args, a.keywords), (b.func, b.args, b.keywords), pairs, originals)
    elif isinstance(a, (types.FunctionType, types.BuiltinFunctionType, type)):
        assert a is b  # copied as themselves
    elif hasattr(a, "__dict__"):
        _walk_pair(vars(a), vars(b), pairs, originals)
    else:
        assert a == b


def _reachable(value, seen: set) -> None:
    if id(value) in seen or isinstance(value, (int, float, str, bool, type(None))):
        return
    seen.add(id(value))
    if isinstance(value, nn.Module):
        _reachable(vars(value), seen)
    elif isinstance(value, dict):
        for v in value.values():
            _reachable(v, seen)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            _reachable(v, seen)


def _models():
    import torchvision

    yield _Shares()
    yield torchvision.models.mobilenet_v3_small()
    yield torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64
    )
    transformers = __import__("pytest").importorskip("transformers")
    yield transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64))


def test_the_meta_copy_is_deepcopys_copy():
    """memory.to_meta copies the module tree with module_copy.deepcopy_module, not copy.deepcopy
    (a tenth of the step on efficientnet_b0): the same object graph, sharing and all."""
    from archlint.model.train.module_copy import deepcopy_module

    for model in _models():
        originals: set = set()
        _reachable(model, originals)
        fast, slow = deepcopy_module(model, {}), copy.deepcopy(model, {})
        _walk_pair(fast, slow, {}, originals)
        assert fast is not model
    shares = deepcopy_module(_Shares(), {})
    assert shares.again is shares.conv and shares.plain_list[0] is shares.blocks[0]
    assert len(shares._forward_hooks) == 1


class _SharesEmpty(nn.Module):
    """Empty containers of a module's state that something else refers to too: module_copy makes a
    memo entry only for those (_alone), so the copy shares them as deepcopy's does."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(2, 2), nn.ReLU(), nn.ReLU()
        self.c._forward_hooks = self.b._forward_hooks  # one empty hook dict, two modules
        self.kept = self.a._parameters  # a module's parameter dict, an attribute too
        self.listed = [self.b._buffers]  # an empty dict reached from a list


def test_the_meta_copy_shares_what_deepcopy_shares():
    from archlint.model.train.module_copy import deepcopy_module

    model = _SharesEmpty()
    originals: set = set()
    _reachable(model, originals)
    fast, slow = deepcopy_module(model, {}), copy.deepcopy(model, {})
    _walk_pair(fast, slow, {}, originals)
    assert fast.c._forward_hooks is fast.b._forward_hooks and fast.b._forward_hooks is not model.b._forward_hooks
    assert fast.kept is fast.a._parameters and fast.listed[0] is fast.b._buffers
    assert fast.a._forward_hooks is not fast.b._forward_hooks  # the others each its own


def test_a_submodule_that_copies_itself_its_own_way_is_copied_so():
    """module_copy copies a submodule of a class it has copied before at once (not through _copy's
    checks): an instance's own __deepcopy__, and a class given to copyreg since, still count."""
    import copyreg

    from archlint.model.train.module_copy import deepcopy_module

    class Own(nn.Module):
        pass

    model = nn.Sequential(Own(), Own(), nn.ReLU())
    deepcopy_module(nn.Sequential(Own()), {})  # the class is known to copy the default way
    model[1].__deepcopy__ = lambda memo: "own copy"
    assert deepcopy_module(model, {})[1] == "own copy" == copy.deepcopy(model)[1]
    copyreg.pickle(nn.ReLU, lambda m: (str, ("reduced",)))
    try:
        assert deepcopy_module(model, {})[2] == "reduced" == copy.deepcopy(model)[2]
    finally:
        del copyreg.dispatch_table[nn.ReLU]


def test_the_step_is_freed_when_its_figures_are_read():
    """Each storage's free is recorded by a weak reference's callback that holds its tracker weakly:
    weakref.finalize's registry held every tracker, and through it the step's optimizer and meta
    model, for the life of the process (each of max_batch's evaluations added one)."""
    net, x = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(4, 8)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()  # freed by reference counts, not by a collection
    try:
        for _ in range(3):
            memory.step_memory(net, (x,), optimizer="adam")
        assert [o for o in gc.get_objects() if isinstance(o, memory._Tracker)] == []
    finally:
        if enabled:
            gc.enable()
