"""Real values for the meta tensors that depend on the inputs alone (archlint.model.train.values):
a model that reads its mask's data (`.item()`, `nonzero()`) is still measured on the meta device,
with the same bytes as the run on real tensors."""

import copy
import json

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from archlint.model.train import memory, metacache
from archlint.model.train.memory import step_memory
from archlint.model.train.values import KnownValues, _Results

META = "measured on the meta device"


class MaskedMean(nn.Module):
    """Pools the positions its mask keeps; skips the masking when the mask keeps them all (as
    Hugging Face's attention masks do with `padding_mask.all()`)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x, mask):
        h = torch.relu(self.proj(x)) * self.scale
        if bool(mask.all()):  # .item() on an input: the real run skips the masking
            return h.mean(1)
        keep = mask.flatten().nonzero().squeeze(1)  # a shape that only the mask's data gives
        return h.flatten(0, 1).index_select(0, keep).mean(0)


def real_run(model, args, optimizer):
    """step_memory as it ran before values were known: on a real copy of the model."""
    first, tracker, forward_end = memory._two_steps(
        copy.deepcopy(model), args, {}, optimizer, "single", "mean", False, False
    )
    return memory._summary(tracker, forward_end)


def test_item_on_an_input_is_answered_on_meta():
    torch.manual_seed(0)
    model, x = MaskedMean(), torch.randn(2, 6, 16)
    for mask in (torch.ones(2, 6, dtype=torch.bool), torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]]).bool()):
        r = step_memory(model, (x, mask), optimizer="adam")
        assert r["basis"].startswith(META), r["basis"]
        real = real_run(model, (x, mask), "adam")
        for key in ("peak_bytes", "activations_bytes", "grads_bytes", "optimizer_bytes", "ops"):
            assert r[key] == real[key], key


def test_writing_an_unknown_into_a_known_tensor_forgets_its_value():
    class Leak(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, mask):
            m = mask.clone()
            m.add_(self.lin(x).detach())  # the mask's copy now holds a weight's data
            return self.lin(x) * (2 if m.sum().item() > 0 else 1)

    r = step_memory(Leak(), (torch.randn(3, 4), torch.zeros(3, 4)), optimizer="sgd")
    assert "real tensors" in r["basis"]  # not answered from the stale value


def test_hugging_face_sdpa_mask_runs_on_meta():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=16, use_cache=False)
    ids = torch.randint(0, 100, (2, 8))
    model = GPT2LMHeadModel(cfg)
    r = step_memory(model, (), {"input_ids": ids}, optimizer="sgd")
    assert r["basis"].startswith(META), r["basis"]
    first, tracker, forward_end = memory._two_steps(
        copy.deepcopy(model), (), {"input_ids": ids}, "sgd", "single", "mean", False, False
    )
    assert r["peak_bytes"] == tracker.peak


class _Run(TorchDispatchMode):
    """Ops on meta tensors through KnownValues, as the memory model's dispatch mode runs them."""

    def __init__(self, known):
        super().__init__()
        self.known = known

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.known.run(func, args, kwargs or {}, metacache.run)


def _known_mask(known, n=1024):  # a float bias of 4 MiB: large enough to be kept
    real = torch.ones(n, n, dtype=torch.bool).tril()[None, None]
    mask = torch.empty_like(real, device="meta")
    known.know(mask, real)
    return mask, real


def test_a_repeated_op_on_the_same_values_is_computed_once():
    """Each attention layer turns the one causal mask into a float bias (16 MiB at 2048 tokens, a fifth of
    an 8B model's analysis when computed per layer): the second layer's is the first's result."""
    known = KnownValues()
    mask, real = _known_mask(known)
    with _Run(known):
        # each layer slices the mask afresh (transformers' sdpa_attention_forward): a new view of the same bytes
        biases = [torch.where(mask[:, :, :, :1024], torch.tensor(0.0), torch.tensor(float("-inf"))) for _ in range(4)]
    assert known.results.hits >= 3
    expected = torch.where(real, 0.0, float("-inf"))
    for bias in biases:
        assert torch.equal(known.values[bias], expected)


def test_a_reused_result_written_in_place_leaves_the_others_as_they_were():
    known = KnownValues()
    mask, real = _known_mask(known)
    with _Run(known):
        first = torch.where(mask, torch.tensor(1.0), torch.tensor(0.0))
        first.mul_(3)  # the step writes to one layer's copy
        second = torch.where(mask, torch.tensor(1.0), torch.tensor(0.0))
        assert known.results.hits == 1
        assert second.sum().item() == real.sum().item()  # answered from the real value: not the written one
        assert first.sum().item() == 3 * real.sum().item()
        # an operand written since is another key: where(1.0, 0.0) of the written mask is computed afresh
        mask.logical_not_()
        third = torch.where(mask, torch.tensor(1.0), torch.tensor(0.0))
    assert known.results.hits == 1
    assert torch.equal(known.values[third], (~real).float())
    # numbers of another type are other arguments (1 and 1.0 give other dtypes)
    assert _Results().key(torch.ops.aten.full.default, ([2], 1), {}) != _Results().key(
        torch.ops.aten.full.default, ([2], 1.0), {}
    )


def test_llama_step_with_reused_mask_values_is_the_exact_step(monkeypatch):
    """The figures of a 2-layer Llama's step (its causal mask a real value) with the results reused and
    without are the same."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from archlint.devices import resolve

    cfg = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    ids = {"input_ids": torch.randint(0, 128, (1, 1024))}  # sdpa's causal mask, 1 MiB: kept
    made = []
    real_init = KnownValues.__init__

    def tracked(self):
        real_init(self)
        made.append(self)

    monkeypatch.setattr(KnownValues, "__init__", tracked)
    reused = step_memory(model, (), ids, optimizer="adamw", device_spec=resolve("h100-sxm"))
    assert made and made[-1].results.hits > 0
    monkeypatch.setattr(_Results, "cacheable", staticmethod(lambda func: False))
    exact = step_memory(model, (), ids, optimizer="adamw", device_spec=resolve("h100-sxm"))
    assert made[-1].results.hits == 0
    assert json.dumps(reused, sort_keys=True) == json.dumps(exact, sort_keys=True)


class CountedNorm(nn.Module):
    """Reads its BatchNorm's step count: momentum=None averages by `num_batches_tracked` (read with
    float()), and the forward takes extra ops once the count is past 0 (each step's `+= 1` ran)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 8)
        self.bn = nn.BatchNorm1d(8, momentum=None)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = self.bn(self.lin(x))
        if int(self.bn.num_batches_tracked) > 0:  # the count after this step's `+= 1`
            h = torch.relu(h) * 2
        return self.head(h)


def test_a_branch_on_a_batchnorm_count_is_the_real_step():
    torch.manual_seed(0)
    model, x = CountedNorm(), torch.randn(6, 3)
    for optimizer in ("sgd", "adam"):
        r = step_memory(model, (x,), optimizer=optimizer)
        assert r["basis"].startswith(META), r["basis"]
        real = real_run(model, (x,), optimizer)
        for key in ("peak_bytes", "activations_bytes", "grads_bytes", "optimizer_bytes", "ops"):
            assert r[key] == real[key], key


def test_an_empty_filled_and_read_gives_its_written_value():
    class Filled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            n = torch.empty(2, dtype=torch.long, device=x.device)
            n.fill_(1)
            n.add_(1)  # a small in-place op on a known value
            return self.lin(x.repeat(int(n.sum()), 1))  # a shape only n's data gives: 4 rows a row

    model, x = Filled(), torch.randn(3, 4)
    r = step_memory(model, (x,), optimizer="sgd")
    assert r["basis"].startswith(META), r["basis"]
    real = real_run(model, (x,), "sgd")
    for key in ("peak_bytes", "activations_bytes", "ops"):
        assert r[key] == real[key], key


def test_an_empty_is_given_its_value_only_when_read():
    values, empty = KnownValues(), torch.ops.aten.empty.memory_format
    out = values.run(empty, ([2, 3],), {"dtype": torch.float32, "device": torch.device("meta")}, metacache.run)
    assert out.is_meta and tuple(out.shape) == (2, 3) and out in values.values
    assert not isinstance(values.values._items[id(out)][1], torch.Tensor)  # not made yet
    made = values.values[out]
    assert made.device.type == "cpu" and made.shape == out.shape and made.stride() == out.stride()
    assert values.values[out] is made  # made once
    values.run(torch.ops.aten.fill_.Scalar, (out, 3.0), {}, metacache.run)
    assert torch.equal(values.values[out], torch.full((2, 3), 3.0))


def test_a_small_in_place_add_on_a_known_count_is_exact():
    values = KnownValues()
    count = torch.zeros((), dtype=torch.long, device="meta")
    values.know(count, torch.tensor(5))
    for _ in range(3):
        out = values.run(torch.ops.aten.add_.Tensor, (count, torch.tensor(1)), {}, metacache.run)
        assert out is count
    assert values.values[count].item() == 8
    values.run(torch.ops.aten.add_.Tensor, (count, torch.tensor(2)), {"alpha": 3}, metacache.run)  # general path
    assert values.values[count].item() == 14


def test_batch_norm_in_training_forgets_the_values_of_its_running_stats():
    """native_batch_norm updates its running statistics in place though its schema does not say so: a
    value kept for them would be stale (a forward that reads `running_mean.item()` after the layer)."""
    known = KnownValues()
    stats = [torch.empty(4, device="meta") for _ in range(2)]
    for meta, real in zip(stats, (torch.zeros(4), torch.ones(4))):
        known.know(meta, real)
    x = torch.empty(3, 4, device="meta")  # an activation: no value
    with _Run(known):
        torch.nn.functional.batch_norm(x, stats[0], stats[1], training=True)
    assert all(meta not in known.values for meta in stats)


def test_a_count_added_to_a_start_value_is_added_when_read():
    """A BatchNorm's `num_batches_tracked += 1` (one a layer) on its start value, not copied yet: the
    adds wait for the value's first read, and give what adding at once gives."""
    values, add_ = KnownValues(), torch.ops.aten.add_
    count, real = torch.zeros((), dtype=torch.long, device="meta"), torch.tensor(5)
    values.know_all([(count, real)])
    for op, n in ((add_.Tensor, 1), (add_.Scalar, 2), (add_.Tensor, -4)):
        assert values.run(op, (count, n), {}, metacache.run) is count
    assert not isinstance(values.values._items[id(count)][1], torch.Tensor)  # not copied yet
    assert values.values[count].item() == 4 and real.item() == 5  # 5 + 1 + 2 - 4; the real buffer untouched
    values.read.add(0)
    assert values.stale_answers()  # the step changed the count it started from


def test_only_an_int64_count_waits(monkeypatch):
    """Only an int64 value (meta and real) plus an int64 number waits: any other add gives what the
    exact path gives, at once (an error where the real or the meta op refuses)."""
    add_ = torch.ops.aten.add_.Tensor
    cases = (
        (torch.bool, torch.tensor(True), 1),  # a Long result cast to Bool: refused
        (torch.long, torch.tensor(True), 1),  # the same, by the real value's dtype
        (torch.bool, torch.tensor(5), 1),  # by the meta tensor's (meta answers from the real result)
        (torch.long, torch.tensor(5), 1 << 64),  # a number too large for int64: refused
    )

    def outcome(dtype, real, n):
        values, meta = KnownValues(), torch.zeros((), dtype=dtype, device="meta")
        values.know_all([(meta, real)])
        try:
            out = values.run(add_, (meta, n), {}, metacache.run)
        except (RuntimeError, OverflowError) as error:
            return type(error)
        return out is meta, values.values[meta].tolist()

    waiting = [outcome(*case) for case in cases]
    monkeypatch.setattr(KnownValues, "_deferred_count_step", lambda self, func, args: False)  # the exact path alone
    assert waiting == [outcome(*case) for case in cases]
    assert waiting[0] is RuntimeError and waiting[3] is OverflowError


def test_stochastic_depth_noise_is_computed_in_place_as_the_general_path_computes_it(monkeypatch):
    """Stochastic depth (torchvision's EfficientNet, one a block) draws its noise into an `empty` and
    scales it in place: ops that write their `self` alone, computed on the value without the general
    path's walk, with the values (and the draws from torch's generator) that path gives."""
    from archlint.model.train import values as values_mod

    def noise():
        known = KnownValues()
        torch.manual_seed(0)
        with _Run(known):
            n = torch.empty(8, 1, 1, 1, device="meta").bernoulli_(0.5).div_(0.5)
        return known.values[n], torch.rand(3)  # the value, and the generator's next draws

    def general_path(*args, **kwargs):
        raise AssertionError("the general path")

    with monkeypatch.context() as m:
        m.setattr(KnownValues, "_computed", general_path)
        in_place = noise()
    with monkeypatch.context() as m:
        m.setattr(values_mod, "_writes_self", lambda func: False)
        general = noise()
    assert all(torch.equal(a, b) for a, b in zip(in_place, general))
    assert set(in_place[0].flatten().tolist()) <= {0.0, 2.0}


def test_only_ops_that_write_their_self_alone_are_computed_in_place():
    from archlint.model.train.values import _writes_self

    aten = torch.ops.aten
    in_place = (aten.add_.Tensor, aten.div_.Tensor, aten.bernoulli_.float, aten.fill_.Scalar)
    # a functional op, an out= op, one that writes its running statistics, one that writes two, a list's
    others = (aten.add.Tensor, aten.add.out, aten.native_batch_norm.default, aten._amp_update_scale_.default)
    others += (aten._foreach_add_.Scalar,)
    assert [_writes_self(op) for op in in_place + others] == [True] * len(in_place) + [False] * len(others)
