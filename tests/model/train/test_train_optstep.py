"""The first step's optimizer.step() written from per-layout templates (archlint.model.train.optstep):
the same first tracker, second tracker, optimizer state and result as torch's step run over every
parameter, with torch's step run on one parameter of each layout; and the step run for real,
unchanged, where the probe does not show that the template holds."""

import json

import pytest
import torch
import torch.nn as nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from archlint.devices import resolve
from archlint.model.train import memory, optstep
from archlint.model.train.memory import step_memory


class ClassToken(nn.Module):
    """ViT's class token: at batch 1 its gradient is a view of cat's whole gradient storage."""

    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 1, 8))
        self.layers = nn.Sequential(*(nn.Linear(8, 8) for _ in range(4)))

    def forward(self, x):
        return self.layers(torch.cat([self.token.expand(x.shape[0], -1, -1), x], dim=1))


class Frozen(nn.Module):
    """Blocks of one layout, a frozen layer among them and a parameter the loss never reaches (no
    gradient: torch's step skips it)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*(nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16)) for _ in range(4)))
        self.blocks[1][0].requires_grad_(False)
        self.unused = nn.Linear(16, 16)

    def forward(self, x):
        return self.blocks(x)


def _tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=3, n_head=2, n_positions=32, use_cache=False)
    ids = torch.randint(0, 100, (2, 16))
    return transformers.GPT2LMHeadModel(cfg), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _resnet():
    torchvision = pytest.importorskip("torchvision")
    return torchvision.models.resnet18(), (torch.randn(1, 3, 64, 64),), {}


CASES = {
    "frozen": lambda: (Frozen(), (torch.randn(4, 16),), {}),
    "class-token": lambda: (ClassToken(), (torch.randn(1, 6, 8),), {}),
    "conv": lambda: (
        nn.Sequential(
            nn.Conv2d(3, 16, 3),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3),
            nn.BatchNorm2d(16),
            nn.Conv2d(16, 16, 3),
            nn.BatchNorm2d(16),
            nn.Conv2d(16, 16, 3),
            nn.BatchNorm2d(16),
            nn.Flatten(),
            nn.Linear(16 * 8 * 8, 10),
        ),
        (torch.randn(2, 3, 16, 16),),
        {},
    ),
    "gpt2": _tiny_gpt2,
    "resnet18": _resnet,
}


def _tracker(t) -> dict:
    """All a tracker holds that the result, the replay and the allocator read."""
    return {
        "records": [(r.nbytes, r.born, r.died, r.op, r.phase, r.module, r.kind) for r in t.records],
        "transients": [(r.nbytes, r.born, r.died, r.op, r.skippable) for r in t.transients],
        "timeline": list(t.timeline),
        "ops": (t.ops, t.events, list(t.op_names), list(t.op_phase), list(t.op_module)),
        "peak": (t.peak, t.peak_event, t.peak_op, t.live_bytes),
        "marks": dict(t.marks),
        "workspaces": {name: (r.nbytes, r.born) for name, r in t.workspaces.items()},
    }


def _state(opt) -> list:
    """The optimizer's state: keys in order, each value's layout and (on the CPU) value."""
    out = []
    for p, state in opt.state.items():
        entry = []
        for name, v in state.items():
            if isinstance(v, torch.Tensor):
                value = v.tolist() if v.device.type != "meta" else None
                layout = (tuple(v.shape), v.stride(), v.storage_offset(), v.untyped_storage().nbytes(), v.dtype)
                entry.append((name, v.device.type, layout, v.requires_grad, value))
            else:
                entry.append((name, v))
        out.append((tuple(p.shape), entry))
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    return [out, groups, [len(g["params"]) for g in opt.param_groups]]


def _run(monkeypatch, build, templated: bool, **options):
    """step_memory with the template allowed or not: (result, first tracker, second tracker, FirstUpdates)."""
    torch.manual_seed(0)
    model, args, kwargs = build()
    seen, updates = {}, []
    real_two, real_call = memory._two_steps, optstep.FirstUpdate.__call__

    def two(*a, **k):
        seen["out"] = real_two(*a, **k)
        return seen["out"]

    def call(self, tracker):
        real_call(self, tracker)
        updates.append(self)

    with monkeypatch.context() as m:
        m.setattr(memory, "_two_steps", two)
        m.setattr(optstep.FirstUpdate, "__call__", call)
        if not templated:
            m.setattr(optstep, "_plan", lambda *a: (None, "switched off by the test", {}))
        result = step_memory(model, args, kwargs, **options)
    first, second, _ = seen["out"]
    return result, first, second, updates


def _same(monkeypatch, build, **options):
    a = _run(monkeypatch, build, True, **options)
    b = _run(monkeypatch, build, False, **options)
    assert json.dumps(a[0], sort_keys=True) == json.dumps(b[0], sort_keys=True)
    assert _tracker(a[1]) == _tracker(b[1])  # the first step's, written from the template
    assert _tracker(a[2]) == _tracker(b[2])  # the second's, which reads the first's
    assert _state(a[2].optimizer) == _state(b[2].optimizer)
    return a[3], b[3]


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-momentum", "adam", "adamw"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_templated_step_is_torchs_step_byte_for_byte(monkeypatch, case, optimizer):
    templated, real = _same(monkeypatch, CASES[case], optimizer=optimizer)
    assert [u.templated for u in templated] == [True], templated[0].reason  # the template was used
    assert [u.templated for u in real] == [False]


def test_a_gpu_spec_with_the_fused_optimizer_is_templated_byte_for_byte(monkeypatch):
    """adam-fused runs the per-tensor step once (meta has no fused kernel) through the tracker's GPU path."""
    templated, _ = _same(monkeypatch, CASES["gpt2"], optimizer="adam-fused", device_spec=resolve("h100-sxm"))
    assert [u.templated for u in templated] == [True]


@pytest.mark.parametrize("optimizer", ["adamw-foreach", "sgd-momentum-foreach"])
def test_a_foreach_step_runs_for_real(monkeypatch, optimizer):
    templated, _ = _same(monkeypatch, CASES["frozen"], optimizer=optimizer)
    assert not templated[0].templated and "foreach" in templated[0].reason


class TwoDtypes(nn.Module):
    """Linear(4, 8) in float32, Linear(8, 3) in float64: four layouts, two classes of two (none to scale)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 3, dtype=torch.float64)

    def forward(self, x):
        return self.b(self.a(x).double())


@pytest.mark.parametrize(
    ("build", "why"),
    [
        (lambda: (TwoDtypes(), (torch.randn(2, 4),), {}), "no fewer layouts to probe than parameters"),
        (lambda: (_linears((4, 8, 8)), (torch.randn(2, 4),), {}), "too few parameters a probed layout"),
    ],
    ids=["4-of-4", "4-of-2"],
)
def test_a_model_of_few_repeated_layouts_runs_for_real(monkeypatch, build, why):
    """Linear(4, 8) then Linear(8, 3, float64): 4 parameters of 4 layouts, none of a class of three
    layouts to scale. Linear(4, 8), Linear(8, 8): 4 parameters of 3 layouts, one class (Adam's loop
    reads no dimension count), probed by its pair: the probe would cost what it saves."""
    templated, _ = _same(monkeypatch, build, optimizer="adam")
    assert not templated[0].templated and templated[0].reason.startswith(why)


class GlobalNorm(torch.optim.SGD):
    """SGD that scales every gradient by their global norm first: an op reads all parameters' tensors."""

    @torch.no_grad()
    def step(self, closure=None):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        norm = torch.stack([g.norm() for g in grads]).norm()
        for g in grads:
            g.div_(norm)
        return super().step(closure)


class Counting(torch.optim.Adam):
    """Adam that counts its steps in an attribute: the step changes the optimizer."""

    def step(self, closure=None):
        self.count = getattr(self, "count", 0) + 1
        return super().step(closure)


@pytest.mark.parametrize(
    ("cls", "why"),
    [(GlobalNorm, "an op that touches two parameters' tensors"), (Counting, "the step set an attribute")],
)
def test_a_step_the_probe_cannot_vouch_for_runs_for_real(monkeypatch, cls, why):
    """Not optimizer knowledge: the probe's own run shows why, and the step runs as torch runs it."""
    lr = {"lr": 0.01, "foreach": False}
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: cls(params, **lr))
    templated, _ = _same(monkeypatch, CASES["frozen"], optimizer="adam")
    assert not templated[0].templated and templated[0].reason.startswith(why)


def test_a_step_hook_runs_for_real(monkeypatch):
    calls = []
    handle = register_optimizer_step_post_hook(lambda *a: calls.append(1))
    try:
        templated, _ = _same(monkeypatch, CASES["frozen"], optimizer="adam")
    finally:
        handle.remove()
    assert not templated[0].templated and templated[0].reason == "optimizer step hooks"
    assert calls  # the hook ran, on the real optimizer


def test_the_template_runs_fewer_ops_through_the_dispatch_mode(monkeypatch):
    """What it is for: torch's step runs on one parameter of each layout, not on every parameter."""
    counts = []
    real = memory._Watch.__torch_dispatch__

    def counted(self, *a, **k):
        counts[-1] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(memory._Watch, "__torch_dispatch__", counted)
    for templated in (True, False):
        counts.append(0)
        _run(monkeypatch, CASES["resnet18"], templated, optimizer="adamw")
    assert counts[0] < counts[1] - 500  # resnet18: 62 parameters with a gradient, 17 layouts: ~13 ops each


class InPlaceAfterState(torch.optim.Adam):
    """Adam whose `_init_group` ends with a loop of ops that make and free nothing (one in-place op
    a parameter): the "update" mark follows the last run's last op, which writes no event."""

    def _init_group(self, group, *args, **kwargs):
        out = super()._init_group(group, *args, **kwargs)
        for p in group["params"]:
            if p.grad is not None:
                self.state[p]["exp_avg"].mul_(1.0)
        return out


def test_a_mark_after_an_op_that_makes_and_frees_nothing_is_written(monkeypatch):
    """The template's marks are set where torch's step sets them, also after a run's last op that
    makes and frees nothing (else the "update" mark was missing: the second step ran, not replayed)."""
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: InPlaceAfterState(params, foreach=False))
    templated, _ = _same(monkeypatch, CASES["frozen"], optimizer="adam")
    assert [u.templated for u in templated] == [True], templated[0].reason


# Classes of layouts: one template for many (optstep._scale). Linear layers between these widths:
# weights (8, 8) x4, (16, 8), (16, 16) x4, (32, 16), (32, 32) x4 (five 2-D layouts of four sizes) and
# biases of 8, 16, 32 (three 1-D layouts): under torch's SGD, Adam, AdamW (whose loops read no
# dimension count) one class, its pair (8,) and (32, 32) probed; else a pair of each dimension count.
WIDE = (8,) * 5 + (16,) * 5 + (32,) * 5


def _linears(widths, dtype=torch.float32) -> nn.Sequential:
    return nn.Sequential(*(nn.Linear(a, b, dtype=dtype) for a, b in zip(widths, widths[1:])))


def _wide():
    return _linears(WIDE), (torch.randn(2, 8),), {}


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-momentum", "adam", "adamw"])
def test_a_class_of_layouts_is_written_from_its_pair_byte_for_byte(monkeypatch, optimizer):
    """Eight layouts, two probed (the fewest and most elements of the one class, a 1-d and a 2-d
    layout): every other layout's births scaled to its own size, its state made in its own layout, as
    torch's step makes them."""
    templated, _ = _same(monkeypatch, _wide, optimizer=optimizer)
    assert [u.templated for u in templated] == [True], templated[0].reason
    assert templated[0].probed == 2 and templated[0].unscaled == []


class RowState(torch.optim.Optimizer):
    """Keeps a statistic per row (a state of the parameter's shape less its last dimension, as
    Adafactor's factored second moment): its bytes follow the rows, not the parameter's elements."""

    def __init__(self, params):
        super().__init__(params, {"lr": 0.01})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["row"] = torch.zeros(p.shape[:-1], dtype=p.dtype, device=p.device)
                state["row"].add_(p.grad[..., 0])
                p.add_(p.grad, alpha=-group["lr"])


def test_a_class_whose_births_do_not_scale_is_probed_layout_by_layout(monkeypatch):
    """The 2-D pair's row states are not of the parameter's shape: that class falls back to a probe
    of each of its layouts (and says why), the 1-D class (a row state of one element) still scales.
    (`_torchs` let through: the rule, not the optimizer's origin, is what is tried here.)"""
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: RowState(params))
    monkeypatch.setattr(optstep, "_torchs", lambda optimizer: True)
    templated, _ = _same(monkeypatch, _wide, optimizer="sgd")
    update = templated[0]
    assert update.templated, update.reason
    assert update.probed == 5 + 2  # the 2-D class's five layouts, the 1-D class's pair
    assert update.unscaled == [
        "2-d float32 parameters: a storage neither a scalar of one size nor of the parameter's shape at one size an element"
    ]


class Plain(torch.optim.AdamW):
    """AdamW under another name: not torch's own class."""


def test_an_optimizer_not_torchs_own_is_probed_layout_by_layout(monkeypatch):
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: Plain(params, foreach=False))
    templated, _ = _same(monkeypatch, _wide, optimizer="adamw")
    assert templated[0].templated and templated[0].probed == 8
    assert templated[0].unscaled[0].startswith("every layout: the optimizer's step is not torch's own")


def test_a_subclass_of_an_optimizer_that_reads_no_dimension_keeps_the_dimension_count(monkeypatch):
    """The allowlist is of exact classes: a subclass (here one counted as torch's own, by its module)
    may branch on a dimension count in a loop of its own, so its classes keep it: a pair of each."""
    monkeypatch.setattr(Plain, "__module__", "torch.optim.plain")
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: Plain(params, foreach=False))
    templated, _ = _same(monkeypatch, _wide, optimizer="adamw")
    assert templated[0].templated and templated[0].probed == 4 and templated[0].unscaled == []


class Mixed(nn.Module):
    """Float32 layers, then float64 ones, a 0-dim and a 1-element parameter: a class of each dtype
    (under SGD or AdamW: their loops read no dimension count), and the one-element parameters probed each."""

    def __init__(self):
        super().__init__()
        self.head = _linears(WIDE)
        self.tail = _linears((32, 32, 32, 32, 16, 16, 16, 16), torch.float64)
        self.temperature = nn.Parameter(torch.ones(()))
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.tail((self.head(x) * self.gain).double()) * self.temperature


@pytest.mark.parametrize("optimizer", ["sgd-momentum", "adamw"])
def test_mixed_dtypes_and_one_element_parameters_are_written_byte_for_byte(monkeypatch, optimizer):
    templated, _ = _same(monkeypatch, lambda: (Mixed(), (torch.randn(2, 8),), {}), optimizer=optimizer)
    update = templated[0]
    assert update.templated and update.unscaled == [], update.reason
    assert update.probed == 2 + 2 + 2  # float32's pair, float64's pair, the two scalars


def _odd():
    """Sizes the GPU's 512-byte rounding does not divide: 100 x 100 floats are 40,000 bytes, 40,448 rounded."""
    return _linears((100, 100, 100, 100, 130, 130, 130, 130, 260, 260, 260, 260)), (torch.randn(2, 100),), {}


def _adamw_single(monkeypatch):
    """AdamW's per-parameter loop on a GPU spec (where its default is foreach)."""
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: torch.optim.AdamW(params, foreach=False))


def test_a_gpu_spec_rounds_each_scaled_size_as_the_tracker_rounds_a_storage(monkeypatch):
    """The probe counts its storages unrounded; each layout's bytes are scaled, then rounded."""
    _adamw_single(monkeypatch)
    templated, _ = _same(monkeypatch, _odd, optimizer="adamw", device_spec=resolve("h100-sxm"))
    assert templated[0].templated and templated[0].probed == 2 and templated[0].unscaled == []


def test_rounded_probe_sizes_are_not_scaled(monkeypatch):
    """Were the probe's sizes rounded (40,448 bytes for 10,000 elements), no whole number of bytes an
    element fits them: the classes are probed layout by layout, never scaled from rounded bytes."""
    _adamw_single(monkeypatch)
    real_scale = optstep._scale

    def rounded(template, *args):
        for part in template.parts:
            if isinstance(part, optstep._Loop):
                for sizes in part.sizes.values():
                    sizes[:] = [[-(-n // 512) * 512 if n else 0 for n in op] for op in sizes]
        return real_scale(template, *args)

    monkeypatch.setattr(optstep, "_scale", rounded)
    templated, _ = _same(monkeypatch, _odd, optimizer="adamw", device_spec=resolve("h100-sxm"))
    assert [u.split(":")[0] for u in templated[0].unscaled] == ["float32 parameters of any dimension count"]


def test_a_wrong_scale_factor_shows_in_the_figures(monkeypatch):
    """What the byte-for-byte tests above stand on: a template scaled by one byte an element too many
    writes other figures than torch's step."""
    real_rule = optstep._birth_rule

    def wrong(*args):
        rule, why = real_rule(*args)
        return {i: [(x + 1, per) if per else (x, per) for x, per in flat] for i, flat in rule.items()}, why

    monkeypatch.setattr(optstep, "_birth_rule", wrong)
    templated = _run(monkeypatch, _wide, True, optimizer="adamw")
    real = _run(monkeypatch, _wide, False, optimizer="adamw")
    assert templated[3][0].templated and templated[3][0].probed == 2
    assert _tracker(templated[1]) != _tracker(real[1])


def _channels_last():
    widths = [(3, 8), (8, 8), (8, 16), (16, 16), (16, 32), (32, 32), (32, 32)]
    model = nn.Sequential(*(nn.Sequential(nn.Conv2d(c, d, 3, padding=1), nn.BatchNorm2d(d)) for c, d in widths))
    return model.to(memory_format=torch.channels_last), (torch.randn(2, 3, 16, 16),), {}


def test_channels_last_weights_are_probed_each(monkeypatch):
    """A weight dense in another order of its dimensions (channels_last) is not of a class: its six
    layouts are probed each; the biases and norms (8, 16, 32 elements) by a pair."""
    templated, _ = _same(monkeypatch, _channels_last, optimizer="adamw")
    assert templated[0].templated and templated[0].probed == 6 + 2 and templated[0].unscaled == []


class Plates(nn.Module):
    """2-D parameters of the given shapes, each read once."""

    def __init__(self, shapes):
        super().__init__()
        self.plates = nn.ParameterList(nn.Parameter(torch.randn(*s)) for s in shapes)

    def forward(self, x):
        return sum((p * x.sum()).sum() for p in self.plates)


@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon is torch 2.9's")
def test_a_shape_the_pair_shares_is_not_taken_for_a_fixed_one(monkeypatch):
    """torch.optim.Muon's Newton-Schulz step makes a Gram matrix of rows x rows: (8, 8) for the pair
    (8, 8) and (8, 128) alike, (16, 16) for (16, 32). Taken for a fixed size it was (8, 8)'s 256 bytes
    for (16, 32) too, and the timeline differed from torch's step; only a scalar's size is fixed."""
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: torch.optim.Muon(params))
    shapes = [(8, 8), (16, 32), (8, 128)] * 4
    templated, _ = _same(monkeypatch, lambda: (Plates(shapes), (torch.randn(2, 4),), {}), optimizer="sgd")
    update = templated[0]
    assert update.templated and update.probed == 3, update.reason
    assert update.unscaled == [
        "2-d float32 parameters: a storage neither a scalar of one size nor of the parameter's shape at one size an element"
    ]


class Dims(nn.Module):
    """Parameters of one to four dimensions, in several sizes: Conv2d kernels (4-d), Conv1d kernels
    (3-d), Linear weights (2-d), biases and a LayerNorm's (1-d). One class where the optimizer's loop
    reads no dimension count: its pair a 1-d bias of 8 and the (32, 32) weight, the 3-d and 4-d
    kernels scaled from them."""

    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 16, 1))
        self.seq = nn.Sequential(nn.Conv1d(16, 16, 3, padding=1), nn.Conv1d(16, 8, 1), nn.Conv1d(8, 8, 3, padding=1))
        self.head = nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.Linear(32, 32), nn.Linear(32, 10))

    def forward(self, x):
        return self.head(self.seq(self.convs(x).flatten(2)).mean(-1))


def _dims():
    return Dims(), (torch.randn(2, 3, 8, 8),), {}


# each optimizer of optstep's allowlist (some in two settings), and how its first step is taken on meta:
# templated from one class's pair; or run for real, for the reason given (None: the step fails on meta
# (ASGD's `.item()`) and runs on a real copy, without FirstUpdate)
ANY_DIMS: list[tuple[type, dict, str | None]] = [
    (torch.optim.SGD, {}, ""),
    (torch.optim.SGD, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}, ""),
    (torch.optim.Adam, {}, ""),
    (torch.optim.Adam, {"amsgrad": True}, ""),
    (torch.optim.AdamW, {}, ""),
    (torch.optim.Adagrad, {}, "the optimizer has state already"),
    (torch.optim.Adadelta, {}, ""),
    (torch.optim.Adamax, {}, ""),
    (torch.optim.ASGD, {}, None),
    (torch.optim.NAdam, {"decoupled_weight_decay": True}, ""),
    (torch.optim.RAdam, {}, ""),
    (torch.optim.RMSprop, {}, ""),
    (torch.optim.RMSprop, {"momentum": 0.9, "centered": True}, ""),
    (torch.optim.Rprop, {}, "the parameters' ops are not one loop over them in order"),
]


@pytest.mark.parametrize(("cls", "kwargs", "why"), ANY_DIMS, ids=[f"{c.__name__}-{len(k)}" for c, k, _ in ANY_DIMS])
def test_one_class_of_any_dimension_count_is_torchs_step_byte_for_byte(monkeypatch, cls, kwargs, why):
    """Under each optimizer the allowlist holds (its loops read no parameter's dimension count), the
    1-d to 4-d parameters are one class of two probed layouts, and the step written from them is
    torch's step over every parameter, byte for byte."""
    assert cls in optstep._ANY_DIMS
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: cls(params, foreach=False, **kwargs))
    assert {p.dim() for p in Dims().parameters()} == {1, 2, 3, 4}
    templated, _ = _same(monkeypatch, _dims, optimizer="adam")
    if why is None:
        assert templated == []
        return
    update = templated[0]
    assert update.templated == (why == "") and update.reason == why
    if not why:
        assert update.probed == 2 and update.unscaled == []


def test_an_allowlisted_class_whose_pair_does_not_prove_its_rule_is_probed_layout_by_layout(monkeypatch):
    """The allowlist only lets layouts of several dimension counts share a class; the pair's runs
    must still prove its rule. RowState (counted here as torch's own and on the allowlist) keeps a
    row statistic: a scalar for the 1-d pair member, a (32,) vector for the (32, 32) one, neither a
    scalar of one size nor of the parameter's shape: the class is probed layout by layout, exactly."""
    monkeypatch.setattr(memory, "make_optimizer", lambda name, params, **k: RowState(params))
    monkeypatch.setattr(optstep, "_torchs", lambda optimizer: True)
    monkeypatch.setattr(optstep, "_ANY_DIMS", optstep._ANY_DIMS | {RowState})
    templated, _ = _same(monkeypatch, _wide, optimizer="sgd")
    update = templated[0]
    assert update.templated, update.reason
    assert update.probed == 8
    assert update.unscaled == [
        "float32 parameters of any dimension count: a storage neither a scalar of one size nor of the "
        "parameter's shape at one size an element"
    ]


@pytest.mark.parametrize(
    ("cls", "classes"),
    [
        (torch.optim.AdamW, [None]),
        (getattr(torch.optim, "Adafactor", None), [4, 1, 3, 2]),
        (Plain, [4, 1, 3, 2]),
    ],
    ids=["AdamW", "Adafactor", "AdamW-subclass"],
)
def test_an_optimizer_that_may_read_a_dimension_count_keeps_it_in_its_classes(cls, classes):
    """Adafactor factors a gradient of more than one dimension (`grad.dim() > 1`): its classes keep
    the dimension count, a pair of each. (Its step reads `param.norm(2).item()`, which meta cannot
    run: archlint runs it on a real copy, never from a template.) A subclass keeps it too."""
    if cls is None:
        pytest.skip("torch.optim.Adafactor is torch 2.5's")
    params = [nn.Parameter(p.detach().to("meta")) for p in Dims().parameters()]
    for p in params:
        p.grad = torch.empty_like(p)
    optimizer = cls(params, foreach=False)
    (_, _, layouts), why = optstep._eligible(optimizer)
    assert why == ""
    torchs, dims = optstep._torchs(optimizer), optstep._reads_dims(optimizer)
    probed, pairs, _ = optstep._probes(layouts, {}, True, dims)
    assert [c[0] for c in pairs] == classes
    assert len(probed) == 2 * len(classes)
    assert dims == (cls is not torch.optim.AdamW) and torchs == (cls is not Plain)
