"""The steady step's forward and backward replayed from the first step (archlint.model.train.steady):
the same memory, byte for byte, as running the second step in full, with one forward run instead of two."""

import copy
import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from archlint.devices import resolve
from archlint.model.train import memory, steady
from archlint.model.train.memory import step_memory


class Counted(nn.Module):
    """An MLP with batch norm, an in-place ReLU and a frozen layer, that counts its forwards."""

    def __init__(self):
        super().__init__()
        self.a, self.bn, self.b = nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4)
        self.b.bias.requires_grad_(False)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.b(torch.relu_(self.bn(self.a(x))))


class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = x + checkpoint(block, x, use_reentrant=False)
        return x


class GrowsABuffer(nn.Module):
    """Registers a buffer at its first forward: the second step starts from another model."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if not hasattr(self, "seen"):
            self.register_buffer("seen", torch.zeros(64, 8, device=x.device))
        return self.lin(x) + self.seen[: x.shape[0]]


class ClassToken(nn.Module):
    """A learnt token put before the inputs (ViT's class token): at batch 1 the token's gradient is
    its slice of cat's gradient, kept by autograd as a view of the whole storage."""

    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 1, 8))
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(torch.cat([self.token.expand(x.shape[0], -1, -1), x], dim=1))


def _tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=32, use_cache=False)
    ids = torch.randint(0, 100, (2, 16))
    return transformers.GPT2LMHeadModel(cfg), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


CASES = {
    "counted": lambda: (Counted(), (torch.randn(4, 8),), {}),
    "checkpointed": lambda: (Checkpointed(), (torch.randn(4, 16),), {}),
    "gpt2": _tiny_gpt2,
    # an LM head: the output (the loop's `out`) is the step's largest tensor; the replay frees the
    # previous step's where the first step's model returned, as the full step does (issue 46)
    # convolutions over feature maps: cuDNN's workspaces inside the op on a GPU spec (transients)
    "conv": lambda: (
        nn.Sequential(
            nn.Conv2d(3, 16, 3),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, stride=2),
            nn.BatchNorm2d(16),
            nn.Flatten(),
            nn.Linear(16 * 6 * 6, 10),
        ),
        (torch.randn(2, 3, 16, 16),),
        {},
    ),
    # a gradient that is a view of a larger storage: replayed as that view of a fresh storage (issue 45)
    "class-token": lambda: (ClassToken(), (torch.randn(1, 6, 8),), {}),
    "lm-head": lambda: (nn.Sequential(nn.Linear(16, 32), nn.Linear(32, 4096)), (torch.randn(8, 16),), {}),
}


def _both(monkeypatch, build, **options):
    torch.manual_seed(0)
    model, args, kwargs = build()
    plans = []
    real_plan = steady.plan
    with monkeypatch.context() as m:
        m.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
        replayed = step_memory(model, args, kwargs, **options)
    assert plans and all(p is not None for p in plans)  # replayed indeed
    with monkeypatch.context() as m:
        m.setattr(steady, "plan", lambda *a, **k: None)  # the second step run in full
        full = step_memory(model, args, kwargs, **options)
    return replayed, full


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "sgd-momentum", "adamw-foreach", "adam-fused"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_replayed_step_is_the_full_step_byte_for_byte(monkeypatch, case, optimizer):
    replayed, full = _both(monkeypatch, CASES[case], optimizer=optimizer)
    assert json.dumps(replayed, sort_keys=True) == json.dumps(full, sort_keys=True)
    assert replayed["output_bytes"] > 0


def test_the_replay_frees_the_previous_output_when_the_model_returns(monkeypatch):
    replayed, _ = _both(monkeypatch, CASES["lm-head"], optimizer="sgd")
    logits = 8 * 4096 * 4
    assert replayed["output_bytes"] == logits
    assert replayed["at_peak"]["outputs"] == 0  # freed before the peak in backward
    # the forward's highest point: this step's logits just made, the last step's not yet freed
    assert replayed["forward_peak_bytes"] >= replayed["params_bytes"] + 2 * logits


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
    )  # grouped-query attention
    return transformers.LlamaForCausalLM(cfg), (), {"input_ids": torch.randint(0, 128, (2, 64))}


def _tiny_vit():
    torchvision = pytest.importorskip("torchvision")
    vit = torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=3, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
    )
    return vit, (torch.randn(4, 3, 32, 32),), {}


GPU_CASES = {**CASES, "llama": _tiny_llama, "vit": _tiny_vit}


@pytest.mark.parametrize("optimizer", ["adam", "adamw-foreach", "sgd-momentum", "adam-fused"])
@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_a_gpu_spec_replays_the_step_byte_for_byte(monkeypatch, case, optimizer):
    """On a GPU spec the first step makes cuBLAS's workspaces and the second holds them from its
    start: the replay leaves their births out, and the report (timeline, allocator replays, the
    peak's op) is the full second step's (issue 45: it used to run the second step in full)."""
    replayed, full = _both(
        monkeypatch, GPU_CASES[case], optimizer=optimizer, device_spec=resolve("h100-sxm"), budget_bytes=1 << 30
    )
    assert json.dumps(replayed, sort_keys=True) == json.dumps(full, sort_keys=True)
    assert replayed["cublas_workspace_bytes"] > 0 and replayed["allocator"]["reserved_peak_bytes"] > 0


def test_the_forward_runs_once(monkeypatch):
    model = Counted()
    plans = []
    real_plan = steady.plan
    monkeypatch.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    step_memory(model, (torch.randn(4, 8),), optimizer="adam")
    # to_meta copies the model with its counter: the copy counts the meta steps
    assert plans and plans[0] is not None
    meta_calls = []
    real_copy = memory._meta_copy
    monkeypatch.setattr(memory, "_meta_copy", lambda m: meta_calls.append(real_copy(m)) or meta_calls[-1])
    step_memory(model, (torch.randn(4, 8),), optimizer="adam")
    assert meta_calls[0][0].calls == 1


def test_a_model_changed_by_its_first_step_runs_the_second_in_full(monkeypatch):
    plans = []
    real_plan = steady.plan
    monkeypatch.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    torch.manual_seed(0)
    model = GrowsABuffer()
    r = step_memory(model, (torch.randn(4, 8),), optimizer="adam")
    assert plans == [None]
    # the buffer made at the first step is there from the start of the second (64×8 floats)
    assert r["buffers_bytes"] == 64 * 8 * 4


def _update_plans(monkeypatch):
    plans = []
    real = steady.plan_update
    monkeypatch.setattr(steady, "plan_update", lambda first: plans.append(real(first)) or plans[-1])
    return plans


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd", "adam-foreach", "adamw-foreach", "sgd-foreach"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_replayed_update_is_the_full_update_byte_for_byte(monkeypatch, case, optimizer):
    """Only the optimizer's update replayed (the forward and backward too, as in every meta step),
    against the second step's optimizer.step() run for real."""
    torch.manual_seed(0)
    model, args, kwargs = CASES[case]()
    with monkeypatch.context() as m:
        plans = _update_plans(m)
        replayed = step_memory(model, args, kwargs, optimizer=optimizer)
    assert plans and plans[0] is not None
    with monkeypatch.context() as m:
        m.setattr(steady, "plan_update", lambda first: None)
        full = step_memory(model, args, kwargs, optimizer=optimizer)
    assert json.dumps(replayed, sort_keys=True) == json.dumps(full, sort_keys=True)


@pytest.mark.parametrize("optimizer", ["sgd-momentum", "sgd-momentum-foreach"])
def test_an_update_that_makes_state_runs_again(monkeypatch, optimizer):
    """SGD's momentum buffer is made in its first update (a clone of the gradient), and later
    updates run other ops: the second step's optimizer.step() runs for real."""
    plans = _update_plans(monkeypatch)
    step_memory(Counted(), (torch.randn(4, 8),), optimizer=optimizer)
    assert plans == [None]


def test_the_optimizer_steps_once(monkeypatch):
    steps = []
    real_step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **k: steps.append(1) or real_step(self, *a, **k))
    step_memory(Counted(), (torch.randn(4, 8),), optimizer="adam")
    assert len(steps) == 1
    steps.clear()
    monkeypatch.setattr(steady, "plan_update", lambda first: None)
    step_memory(Counted(), (torch.randn(4, 8),), optimizer="adam")
    assert len(steps) == 2


def test_the_replay_makes_gradients_only_where_they_are_read(monkeypatch):
    """step_memory reads the step's figures alone: where the update is replayed too, nothing reads the
    gradients after the replay, and it makes none as tensors (their records are the same: the
    byte-for-byte tests above); where the optimizer's own step runs (SGD's momentum), it reads them."""
    made = []
    real = steady.fresh_like
    monkeypatch.setattr(steady, "fresh_like", lambda grad: made.append(grad) or real(grad))
    step_memory(Counted(), (torch.randn(4, 8),), optimizer="adam")
    assert made == []
    step_memory(Counted(), (torch.randn(4, 8),), optimizer="sgd-momentum")
    assert len(made) == 5  # every trainable parameter's: a's two, bn's two, b.weight (b.bias is frozen)


def test_init_marked_leaves_the_optimizer_as_it_was():
    params = [nn.Parameter(torch.randn(3))]
    opt = torch.optim.Adam(params)
    tracker = SimpleNamespace(events=0, ops=0, live_bytes=0, marks={})
    with steady.init_marked(opt, tracker):
        params[0].grad = torch.randn(3)
        opt.step()
    assert "_init_group" not in vars(opt) and {"init", "update"} <= set(tracker.marks)
    two_groups = torch.optim.Adam([{"params": params}, {"params": [nn.Parameter(torch.randn(2))]}])
    tracker = SimpleNamespace(events=0, ops=0, live_bytes=0, marks={})
    with steady.init_marked(two_groups, tracker):
        two_groups.step()
    assert "init" not in tracker.marks  # per group init and update interleave: not marked


def test_a_gpu_op_that_holds_a_workspace_and_makes_a_buffer_is_not_replayed(monkeypatch):
    """The timeline keeps one figure an op: where an op made both a kept cuBLAS workspace and a
    transient buffer, the replay could not tell them apart, so the second step runs in full."""
    real_reduction = memory.reduction_workspace
    gemms = {torch.ops.aten.addmm.default, torch.ops.aten.mm.default}
    monkeypatch.setattr(
        memory,
        "reduction_workspace",
        lambda func, args, *grid: 1 << 20 if func in gemms else real_reduction(func, args, *grid),
    )
    plans = []
    real_plan = steady.plan
    monkeypatch.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    torch.manual_seed(0)
    model, args, kwargs = CASES["counted"]()
    result = step_memory(model, args, kwargs, optimizer="adam", device_spec=resolve("h100-sxm"))
    assert plans == [None]
    monkeypatch.setattr(steady, "plan", lambda *a: None)
    assert json.dumps(
        step_memory(model, args, kwargs, optimizer="adam", device_spec=resolve("h100-sxm")), sort_keys=True
    ) == json.dumps(result, sort_keys=True)


def test_replayed_records_copy_every_field():
    """A replayed record is its first-step record, alive, of its phase's kind (the forward's an
    activation, any other a temporary, as _measure's last pass classes a storage nothing claims), at
    its shifted op: every other field copied (the records have slots, and `_Tracker.reborn` names each
    field: a new one must be copied too)."""
    import dataclasses
    import math

    tracker = memory._Tracker()
    x = torch.empty(4, device="meta")
    rec = tracker.see(x, "start")
    rec.kind, rec.died, rec.skippable, rec.module = "params", 7, True, "features.0"
    tracker.ops, tracker.phase = 3, "forward"  # the next one made by op 2
    made = tracker.born(16)
    made.died, made.kind = 3, "grads"
    copies = tracker.reborn([rec, made], 5)
    # made before the step: op stays -1
    assert copies[0] == dataclasses.replace(rec, died=math.inf, kind="temporaries")
    assert copies[1] == dataclasses.replace(made, op=made.op + 5, died=math.inf, kind="activations")
    assert all(c is not r for c, r in zip(copies, (rec, made)))
    tracker.pending.clear()


def test_shifted_scratch_copies_every_field():
    """A replayed kernel scratch is its first-step record born, freed and made later by the shifts:
    every other field copied (`shifted` names each field, as `_Tracker.reborn` does)."""
    import dataclasses

    tracker = memory._Tracker(cpu_threads=2)
    tracker.ops, tracker.phase, tracker.modules = 4, "backward", ["features.1"]
    nbytes = tracker.transient(4096, skippable=False)
    (t,) = tracker.transients
    assert nbytes == t.nbytes == 4096
    moved = t.shifted(10, 3)
    assert moved == dataclasses.replace(t, born=t.born + 10, died=t.died + 10, op=t.op + 3)
    assert moved is not t and (t.born, t.died, t.op) == (0, 1, 3)


def test_see_start_counts_as_see_does():
    """`see_start` (the step's start, a thousand tensors in one loop) leaves the tracker as `see(t,
    "start")` on each does: the same records, events, live bytes and peak, the kinds set (or kept
    where `keep` and one is set) and a shared storage seen once; GPU rounding and the carried
    records of the storages the first step had too."""
    a, b = torch.empty(10, device="meta"), torch.empty(3, 7, device="meta")
    view, c = a[2:], torch.empty(1, device="meta")

    def fill(tracker, bulk):
        if bulk:
            tracker.see_start([a, b], "params")
            seen = tracker.see_start([view, c], "buffers", keep=True)
        else:
            for t in (a, b):
                tracker.see(t, "start").kind = "params"
            seen = []
            for t in (view, c):
                rec = tracker.see(t, "start")
                rec.kind = rec.kind or "buffers"
                seen.append(rec)
        return seen

    for round_to in (1, 512):
        old, new = memory._Tracker(round_to=round_to), memory._Tracker(round_to=round_to)
        for tracker in (old, new):
            tracker.events, tracker.live_bytes, tracker.peak = 5, 100, 120
            tracker.before = {id(b.untyped_storage()): "b's first record"}
        seen_old, seen_new = fill(old, False), fill(new, True)
        assert seen_new == seen_old and seen_new[0] is new.records[0]  # the view's storage: a's record
        assert new.records == old.records and [r.kind for r in new.records] == ["params", "params", "buffers"]
        for name in ("events", "live_bytes", "peak", "peak_event", "peak_op"):
            assert getattr(new, name) == getattr(old, name), name
        assert [(r.born, prior) for r, prior in new.carried] == [(6, "b's first record")]
        assert len(new.pending) == 3 and set(new.by_id) == set(old.by_id)
        old.pending.clear()
        new.pending.clear()
    watched, unwatched = memory._Tracker(), memory._Tracker()
    assert unwatched.see_start([a, b], "params", watch=False) == watched.see_start([a, b], "params")
    assert unwatched.records == watched.records and unwatched.live_bytes == watched.live_bytes == 124
    assert len(watched.pending) == 2 and not unwatched.pending  # held by the caller: no free to record
    watched.pending.clear()


def test_see_start_sees_a_storage_given_twice_once():
    """A storage given twice in one call (a tensor and its view, new to the tracker) is one record,
    as `see` makes it; the peak's event is the last birth that raised the live bytes (an empty
    storage after it raises nothing)."""
    a, empty = torch.empty(10, device="meta"), torch.empty(0, device="meta")
    old, new = memory._Tracker(), memory._Tracker()
    seen = new.see_start([a, a[2:], empty], "params")
    for t in (a, a[2:], empty):
        old.see(t, "start").kind = "params"
    assert len(new.records) == 2 and seen[0] is seen[1] and new.records == old.records
    for name in ("events", "live_bytes", "peak", "peak_event", "peak_op"):
        assert getattr(new, name) == getattr(old, name), name
    assert (new.peak, new.peak_event) == (40, 0)
    old.pending.clear()
    new.pending.clear()


class BranchesOnItsCounter(nn.Module):
    """Takes a longer way at odd steps: its forward reads the count its own BatchNorm keeps, which the
    step itself moves (1 in the first step, 2 in the second)."""

    def __init__(self):
        super().__init__()
        self.bn, self.lin = nn.BatchNorm1d(16), nn.Linear(16, 16)

    def forward(self, x):
        h = self.bn(x)
        if bool(self.bn.num_batches_tracked % 2 == 1):  # computed from the count: what it was computed from counts
            h = self.lin(torch.tanh(self.lin(torch.relu(self.lin(h)))))
        return self.lin(h)


class BranchesOnItsRunningMean(nn.Module):
    """Reads a running statistic the step updates: zero in the first step only."""

    def __init__(self):
        super().__init__()
        self.bn, self.lin = nn.BatchNorm1d(16), nn.Linear(16, 16)

    def forward(self, x):
        if self.bn.running_mean[0].item() == 0.0:
            x = torch.tanh(self.lin(torch.relu(self.lin(x))))
        return self.lin(self.bn(x))


def _real_step(model, args):
    """The step's figures run on a real copy of the model (no meta, no values, no replay)."""
    first, tracker, forward_end = memory._two_steps(
        copy.deepcopy(model), args, {}, "adam", "single", "mean", False, False
    )
    return memory._summary(tracker, forward_end)


@pytest.mark.parametrize("build", [BranchesOnItsCounter, BranchesOnItsRunningMean])
def test_a_forward_that_reads_what_the_step_changes_is_not_replayed(monkeypatch, build):
    """The first step's branch is not the second's: the second is not the first's replayed."""
    plans = []
    real_plan = steady.plan
    monkeypatch.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    torch.manual_seed(0)
    model, x = build(), torch.randn(8, 16) + 1
    r = step_memory(model, (x,), optimizer="adam")
    real = _real_step(model, (x,))
    assert all(p is None for p in plans)
    for key in ("peak_bytes", "activations_bytes", "ops"):
        assert r[key] == real[key], key


def test_a_batch_norm_model_that_reads_an_input_mask_is_still_replayed(monkeypatch):
    """A data-dependent answer from the inputs alone, which the step leaves as they were: replayed,
    though the step moves the BatchNorm's buffers (which nothing reads)."""

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn, self.lin = nn.BatchNorm1d(16), nn.Linear(16, 16)

        def forward(self, x, mask):
            h = self.lin(self.bn(x))
            return h.mean() if bool(mask.all()) else h[mask].mean()

    plans = []
    real_plan = steady.plan
    monkeypatch.setattr(steady, "plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    model, x, mask = Masked(), torch.randn(8, 16), torch.ones(8, dtype=torch.bool)
    r = step_memory(model, (x, mask), optimizer="adam")
    assert plans and all(p is not None for p in plans)
    assert r["ops"] == _real_step(model, (x, mask))["ops"]
