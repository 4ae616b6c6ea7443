"""What --train does around the meta steps, made faster without changing a figure: the meta copy
finds the buffers' copies as it walks, the spans of a step are slices of its records (in birth
order), the step's trackers stop listening once its figures are read, the step's costs walk the
parameters once, and max_batch's search makes no real input whose data no step reads."""

import copy

import torch
import torch.nn as nn

from archlint.model.train import fit, memory, steady
from archlint.model.train.module_copy import deepcopy_module
from archlint.model.train.step import unique_parameters
from archlint.model.train.values import VALUE_LIMIT_BYTES


class _SharedBuffers(nn.Module):
    """A buffer registered under two modules, one that is also a plain tensor attribute of a module
    walked before it, and a module reached twice."""

    def __init__(self):
        super().__init__()
        self.first = nn.BatchNorm1d(4)
        self.table = torch.arange(4.0)  # a tensor attribute, walked before `later` registers it
        self.later = nn.Module()
        self.later.register_buffer("table", self.table)
        self.later.register_buffer("stats", self.first.running_mean)  # one buffer, two names
        self.again = self.first


class _OwnCopy(nn.Module):
    """A module that copies itself its own way: its copy's buffer is not the one the walk made."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))

    def __deepcopy__(self, memo):
        return _OwnCopy()


def _by_name(model, meta):
    named = dict(meta.named_buffers())
    return [(named[n], b) for n, b in model.named_buffers() if n in named]


def test_the_meta_copy_pairs_each_buffer_as_the_walk_by_names_does():
    import torchvision

    for model in (_SharedBuffers(), torchvision.models.mobilenet_v3_small(), nn.Sequential(nn.Linear(2, 2))):
        meta, pairs = memory._meta_copy(model)
        expected = _by_name(model, meta)
        assert [(id(m), id(r)) for m, r in pairs] == [(id(m), id(r)) for m, r in expected]
        assert all(m.device.type == "meta" for m, _ in pairs)


def test_a_copy_that_does_not_keep_a_buffer_falls_back_to_names():
    model = nn.Sequential(_OwnCopy(), nn.BatchNorm1d(3))
    meta, pairs = memory._meta_copy(model)
    assert pairs is None  # the copy's own buffer is not the walk's: paired by name instead
    values = memory._input_values(model, meta, ((), {}), ((), {}))
    assert set(values.values._items) == {id(m) for m, _ in _by_name(model, meta) if m.device.type == "meta"}
    assert len(values.values._items) == 3  # the batch norm's (the other module's copy is its own, real)


def test_a_module_missing_hook_dicts_is_copied_as_deepcopy_copies_it():
    # an old pickled module lacks some of the hook dicts: nn.Module.__setstate__ adds them
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    del model[0].__dict__["_forward_hooks_always_called"]
    fast, slow = deepcopy_module(model, {}), copy.deepcopy(model)
    assert list(vars(fast[0])) == list(vars(slow[0]))
    assert fast[0]._forward_hooks_always_called == {} and type(fast[0]._forward_hooks_always_called) is type(
        slow[0]._forward_hooks_always_called
    )


def test_a_trackers_records_are_in_birth_order(monkeypatch):
    """steady.plan and plan_update take each span as a slice of the records (_born_from)."""
    trackers = []
    real = memory._two_steps
    monkeypatch.setattr(memory, "_two_steps", lambda *a, **k: trackers.append(real(*a, **k)) or trackers[-1])
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 30 * 30, 4))
    memory.step_memory(net, (torch.randn(2, 3, 32, 32),), optimizer="adamw")
    first, second, _ = trackers[0]
    for tracker in (first, second):
        born = [r.born for r in tracker.records]
        assert born == sorted(born) and len(set(born)) == len(born)
    marks = first.marks
    start, end = marks["forward"].events, marks["step"].events
    span = first.records[steady._born_from(first.records, start) : steady._born_from(first.records, end)]
    assert span == [r for r in first.records if start <= r.born < end] and span


def test_the_step_stops_listening_once_its_figures_are_read(monkeypatch):
    """The frees that come after step_memory returns (the meta model's, the optimizer state's) are
    not recorded: nothing reads the trackers again."""
    trackers = []
    real = memory._two_steps
    monkeypatch.setattr(memory, "_two_steps", lambda *a, **k: trackers.append(real(*a, **k)) or trackers[-1])
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    memory.step_memory(net, (torch.randn(4, 8),), optimizer="adam")
    first, second, _ = trackers[0]
    assert first.pending == {} and second.pending == {}


def test_unique_parameters_are_named_parameters():
    transformers = __import__("pytest").importorskip("transformers")
    tied = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64))
    shared = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    shared.append(shared[0])  # one module reached twice
    for model in (tied, shared, _SharedBuffers()):
        every = list(model.named_parameters(remove_duplicate=False))
        assert [(n, id(p)) for n, p in unique_parameters(every)] == [(n, id(p)) for n, p in model.named_parameters()]


def test_max_batch_makes_no_real_input_no_step_reads(monkeypatch):
    """The search's steps on meta read the values of inputs up to values.VALUE_LIMIT_BYTES only:
    a larger input is made on meta, not repeated row by row on this machine."""
    seen = []
    real = fit.step_memory
    monkeypatch.setattr(fit, "step_memory", lambda m, a, k, **o: seen.append(a) or real(m, a, k, **o))
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 2))
    x = torch.randn(2, 3, 64, 64)  # 96 KiB a row: 16 MiB at about 170 rows
    fit.fit_report(model, (x,), {}, optimizer="sgd", budget_bytes=400 << 20)
    batches = [(a[0].shape[0], a[0].device.type) for a in seen[1:]]
    row = x[0].nbytes
    assert any(b * row > VALUE_LIMIT_BYTES for b, _ in batches)
    assert all((device == "meta") == (b * row > VALUE_LIMIT_BYTES) for b, device in batches)


class _FrozenNorm(nn.Module):
    """A module with a train() of its own: its norm stays in eval mode."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.lin = nn.Linear(4, 4)

    def train(self, mode: bool = True):
        super().train(mode)
        self.norm.eval()
        return self

    def forward(self, x):
        return self.lin(self.norm(x))


class _ReadsChild(nn.Module):
    """A train() of its own that reads a child's mode before nn.Module.train sets it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.child_was_training = None

    def train(self, mode: bool = True):
        self.child_was_training = self.lin.training
        return super().train(mode)


def test_the_step_walk_puts_the_model_in_train_mode_as_model_train_does():
    inner = _ReadsChild()
    wrapped = nn.Sequential(nn.Linear(4, 4), inner)
    wrapped.eval()
    memory._walk(wrapped, train=True)
    assert inner.child_was_training is False  # nothing set before the module's own train() ran
    for model in (nn.Sequential(nn.Linear(4, 4), nn.Dropout(), _FrozenNorm()), _FrozenNorm()):
        model.eval()
        expected = copy.deepcopy(model).train()
        walk = memory._walk(model, train=True)
        assert [m.training for m in model.modules()] == [m.training for m in expected.modules()]
        assert walk.paths == memory._walk(model).paths
    assert not model.norm.training and model.lin.training


def test_the_copys_module_keys_are_what_this_torchs_setstate_adds():
    """module_copy skips nn.Module.__setstate__ when the state holds every key it would add
    (_MODULE_KEYS, written out from torch's code): a torch that adds another would leave copied
    modules without it. Pinned here against the installed torch's own __setstate__."""
    from torch import nn

    from archlint.model.train.module_copy import _MODULE_KEYS

    bare = nn.Module.__new__(nn.Module)
    nn.Module.__setstate__(bare, {})
    assert set(vars(bare)) == _MODULE_KEYS
