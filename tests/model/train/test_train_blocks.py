"""A repeated block's first-step forward and backward written from earlier instances
(archlint.model.train.blocks): the same result as the exact run, byte for byte, with the reuse
said; no reuse where the chain is too short, broken, called with more than one tensor or in place
on its input; the exact step run again where a premise fails after the stand-ins ran. The
mutation tests show the comparison sees a stand-in that frees the incoming gradient late, keeps
its input or leaves a parameter without its gradient."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from archlint.model.train import blocks
from archlint.model.train.memory import step_memory


class Mlp(nn.Module):
    """A transformer block's shape: its input saved by its norm, freed in its own backward; a
    dropout's mask kept for backward."""

    def __init__(self, d=16):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(self.act(self.fc1(self.norm(x)))))


class Bottle(nn.Module):
    """A ResNet block's shape: batch norm (its step counter a known value), an in-place ReLU whose
    saved result keeps the block's output, the input kept by the previous block's ReLU."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


class Chain(nn.Module):
    def __init__(self, make, n, stem, head):
        super().__init__()
        self.stem = stem
        self.blocks = nn.Sequential(*(make() for _ in range(n)))
        self.head = head

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def mlp_chain(n=6):
    return Chain(Mlp, n, nn.Linear(16, 16), nn.Linear(16, 4)), (torch.randn(2, 5, 16),)


def conv_chain(n=6):
    stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    return Chain(Bottle, n, stem, head), (torch.randn(2, 3, 12, 12),)


def _both(model, args, monkeypatch, **kwargs):
    model.train()
    out = []
    for on in (False, True):
        monkeypatch.setattr(blocks, "ENABLED", on)
        out.append(step_memory(model, args, **kwargs))
    return out


def _figures(result: dict) -> str:
    """The result less what says the reuse (the blocks reused, or the note that the step ran again)."""
    result = dict(result)
    result.pop("reused_blocks", None)
    result.pop("reused_blocks_basis", None)
    notes = [n for n in result.pop("notes", []) if not n.startswith("repeated blocks")]
    if notes:
        result["notes"] = notes
    return json.dumps(result, sort_keys=True)


@pytest.mark.parametrize("make", [mlp_chain, conv_chain], ids=["mlp", "conv"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_reused_blocks_give_the_exact_figures(make, optimizer, monkeypatch):
    model, args = make()
    off, on = _both(model, args, monkeypatch, optimizer=optimizer)
    assert _figures(off) == _figures(on)
    assert "reused_blocks" not in off
    assert on["reused_blocks"] == [
        {
            "module": "blocks",
            "class": type(model.blocks[0]).__name__,
            "chain": "0-5",
            "reused": "2-3",
            "forward_from": "blocks.1",
            "backward_from": "blocks.4",
        }
    ]
    assert on["reused_blocks_basis"] == blocks.BASIS
    assert "notes" not in on or not any("repeated blocks" in n for n in on["notes"])


def test_a_chain_that_ends_the_model(monkeypatch):
    """The last block's output is the model's (the loss's gradient, expanded, comes in): the template
    is the last but one, fed by a block as the stand-ins are; reused, no second run."""
    model = nn.Sequential(nn.Linear(16, 16), *(Mlp() for _ in range(6)))
    off, on = _both(model, (torch.randn(2, 5, 16),), monkeypatch)
    assert on["reused_blocks"][0]["backward_from"] == "5"
    assert not any(n.startswith("repeated blocks") for n in on.get("notes", []))
    assert _figures(off) == _figures(on)


class Pixels(nn.Module):
    """No GEMM before the chain: its first block makes cuBLAS's workspace on a GPU spec."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(16))

    def forward(self, x):
        return x * self.scale


@pytest.mark.parametrize("stem, chain", [(nn.Linear(16, 16), "0-6"), (Pixels(), "1-6")], ids=["gemm-before", "gemm-in"])
def test_a_gpu_spec(stem, chain, monkeypatch):
    """On a GPU spec (rounded blocks, cuBLAS's workspaces held from a thread's first GEMM, the
    allocator's replay) the same figures; a first block that makes the workspace is left out."""
    from archlint.devices import resolve

    model = Chain(Mlp, 7, stem, nn.Linear(16, 4))
    off, on = _both(model, (torch.randn(2, 5, 16),), monkeypatch, device_spec=resolve("h100-sxm"), optimizer="adamw")
    assert on["reused_blocks"][0]["chain"] == chain
    assert _figures(off) == _figures(on)


def test_the_stand_ins_gradients_are_the_parameters(monkeypatch):
    """The optimizer's state is made for every parameter: the stand-ins' gradients are on `p.grad`."""
    model, args = mlp_chain()
    off, on = _both(model, args, monkeypatch, optimizer="adam")
    params = list(model.parameters())  # two moments each, and a float32 step count
    assert on["optimizer_bytes"] == 2 * sum(p.numel() * 4 for p in params) + 4 * len(params)
    assert _figures(off) == _figures(on)


def test_frozen_parameters_get_no_gradient(monkeypatch):
    """Each block's norm frozen: no gradient for it in the stand-ins either (Adam's state: none)."""
    model, args = mlp_chain()
    for block in model.blocks:
        block.norm.requires_grad_(False)
    off, on = _both(model, args, monkeypatch)
    assert on["reused_blocks"] and _figures(off) == _figures(on)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_a_chain_too_short_is_run_exactly(n, monkeypatch):
    model, args = mlp_chain(n)
    off, on = _both(model, args, monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)


def test_a_chain_broken_by_another_block(monkeypatch):
    """Three, a different block, three: no run of six; then a run of six after it: reused."""
    model, args = mlp_chain(7)
    model.blocks[3] = Mlp(16)
    model.blocks[3].fc1 = nn.Linear(16, 24)
    model.blocks[3].fc2 = nn.Linear(24, 16)
    off, on = _both(model, args, monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)
    model, args = mlp_chain(10)
    model.blocks[3].fc1 = nn.Linear(16, 24)
    model.blocks[3].fc2 = nn.Linear(24, 16)
    off, on = _both(model, args, monkeypatch)
    assert [(b["chain"], b["reused"]) for b in on["reused_blocks"]] == [("4-9", "6-7")]
    assert _figures(off) == _figures(on)


class TwoTensors(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(16, 16)
        self.layers = nn.ModuleList(Mlp() for _ in range(6))

    def forward(self, x):
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x) * 1.0
        return x


class InPlace(Mlp):
    def forward(self, x):
        return super().forward(x.mul_(1.0))


def test_no_reuse_where_the_premises_fail_before_a_stand_in(monkeypatch):
    """Ops between the blocks (the output not fed straight in), an in-place op on the input: run exactly."""
    model = TwoTensors()
    off, on = _both(model, (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)
    model = Chain(InPlace, 6, nn.Linear(16, 16), nn.Linear(16, 4))
    off, on = _both(model, (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)


def test_the_step_runs_again_exactly_where_the_backward_differs(monkeypatch):
    """The second instance's backward compared with the last's after the stand-ins ran: where they
    differ the whole first step runs again without them, said in the notes, the figures exact."""
    model, args = conv_chain()
    same = blocks._Span.same
    monkeypatch.setattr(blocks._Span, "same", lambda self, other: same(self, other) and self.phase == "forward")
    off, on = _both(model, args, monkeypatch)
    assert "reused_blocks" not in on
    assert any("repeated blocks: run exactly" in n and "backward differs" in n for n in on["notes"])
    assert _figures(off) == _figures(on)


class Transposed(nn.Module):
    """A stem whose output is a transposed view: the first block's input laid out otherwise than the
    others' (ViT's: batch first, then sequence first), the same ops."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x).transpose(0, 1)


class View(Mlp):
    def forward(self, x):
        super().forward(x)
        return x.view(x.shape)


def test_a_view_of_the_input_is_not_reused(monkeypatch):
    model = Chain(View, 6, nn.Linear(16, 16), nn.Linear(16, 4))
    off, on = _both(model, (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)


class Keywords(nn.Module):
    """Layers given a tensor that needs a gradient (T5's position bias, made once for all layers):
    its gradient is added up from every layer, which a stand-in does not give: not reused."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(16, 16)
        self.bias = nn.Parameter(torch.ones(16))
        self.layers = nn.ModuleList(Masked() for _ in range(6))

    def forward(self, x):
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x, mask=self.bias)
        return x


class Masked(Mlp):
    def forward(self, x, mask=None, scale=1.0):
        return super().forward(x) * mask * scale


class SharedMask(nn.Module):
    """Layers given one mask (a buffer: no gradient, a known value) and a plain keyword: reused."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.ones(16))
        self.stem = nn.Linear(16, 16)
        self.layers = nn.ModuleList(Masked() for _ in range(6))

    def forward(self, x):
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x, mask=self.mask, scale=1.0)
        return x


class Fresh(SharedMask):
    """A mask made afresh for each layer (the last one freed: the same id possible): not reused."""

    def forward(self, x):
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x, mask=self.mask * 1.0)
        return x


def test_other_arguments_the_same_at_each_call(monkeypatch):
    off, on = _both(SharedMask(), (torch.randn(2, 5, 16),), monkeypatch)
    assert on["reused_blocks"][0]["reused"] == "2-3" and _figures(off) == _figures(on)
    off, on = _both(Fresh(), (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)


def test_the_first_input_laid_out_otherwise(monkeypatch):
    model = Chain(Mlp, 6, Transposed(), nn.Linear(16, 4))
    off, on = _both(model, (torch.randn(2, 5, 16),), monkeypatch)
    assert on["reused_blocks"][0]["reused"] == "2-3"
    assert _figures(off) == _figures(on)


def test_keyword_tensors_are_not_reused(monkeypatch):
    off, on = _both(Keywords(), (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)


class Checkpointed(Chain):
    """Each block under activation checkpointing (its saved tensors freed and recomputed): not reused."""

    def __init__(self, reentrant: bool):
        super().__init__(Mlp, 6, nn.Linear(16, 16), nn.Linear(16, 4))
        self.reentrant = reentrant

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        x = self.stem(x)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(x)


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_is_not_reused(reentrant, monkeypatch):
    off, on = _both(Checkpointed(reentrant), (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)


def _drop(name):
    """A mutation of the backward template: its free of `name` left out."""
    read = blocks._read_span

    def wrong(tracker, opened, prefix, phase, outside):
        span, births = read(tracker, opened, prefix, phase, outside)
        if phase == "backward":
            for o in span.ops:
                o.items = [i for i in o.items if not (i[0] == "d" and i[1] == (name,))]
        return span, births

    return wrong


@pytest.mark.parametrize(
    "mutation, make",
    [("gout", mlp_chain), ("gout", conv_chain), ("in", mlp_chain), ("grad", conv_chain)],
    ids=["grad-out-freed-late", "grad-out-freed-late-conv", "input-kept", "no-parameter-gradient"],
)
def test_a_wrong_stand_in_changes_the_figures(mutation, make, monkeypatch):
    """The comparison the tests above make sees a stand-in that gets a hazard wrong."""
    model, args = make()
    monkeypatch.setattr(blocks, "ENABLED", False)
    off = step_memory(model.train(), args)
    if mutation == "grad":
        monkeypatch.setattr(blocks, "_give_grad", lambda param, grad: None)
    else:
        monkeypatch.setattr(blocks, "_read_span", _drop(mutation))
    monkeypatch.setattr(blocks, "ENABLED", True)
    wrong = step_memory(model, args)
    assert wrong["reused_blocks"]  # the stand-ins ran (no premise failed)
    assert _figures(off) != _figures(wrong)


def test_the_text_report_says_the_reuse(tmp_path):
    """The memory section's text names the blocks written from others (the JSON's reused_blocks)."""
    target = tmp_path / "chain.py"
    target.write_text(
        "import torch.nn as nn\n"
        "class Mlp(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.norm, self.fc = nn.LayerNorm(16), nn.Linear(16, 16)\n"
        "    def forward(self, x):\n"
        "        return x + self.fc(self.norm(x))\n"
        "def make():\n"
        "    return nn.Sequential(nn.Linear(16, 16), nn.Sequential(*(Mlp() for _ in range(6))))\n",
        encoding="utf-8",
    )
    root = str(Path(blocks.__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-m", "archlint", f"{target}:make", "--input-shape", "2,5,16", "--train"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=300,
    )
    assert out.returncode in (0, 1), out.stderr
    assert "memory: 1 blocks 2-3 (Mlp) written from 1.1 (forward) and 1.4 (backward)" in out.stdout


class Cached(Mlp):
    """A table made at the block's first call and kept on it (a rotary embedding's cache)."""

    def __init__(self):
        super().__init__()
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            self.cache = torch.ones(4096, device=x.device)
        return super().forward(x) + self.cache[:16]


class Warm(nn.Linear):
    """An extra op at its first call only (a flag set in forward)."""

    def __init__(self):
        super().__init__(16, 16)
        self.warm = False

    def forward(self, x):
        y = super().forward(x)
        if not self.warm:
            self.warm = True
            y = y * 1.0
        return y


class Hidden(nn.Module):
    """Every block's output kept and summed after the chain (hidden states): a stand-in's output is
    freed outside its block, a premise that fails after the stand-ins ran (the step runs again)."""

    def __init__(self, make=Mlp, stem=Warm):
        super().__init__()
        self.stem = stem()
        self.layers = nn.ModuleList(make() for _ in range(7))

    def forward(self, x):
        x = self.stem(x)
        states = []
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        return torch.stack(states).sum(0)


class WarmBlock(Mlp):
    def __init__(self):
        super().__init__()
        self.warm = Warm()

    def forward(self, x):
        return super().forward(self.warm(x))


@pytest.mark.parametrize(
    "build",
    [
        lambda: Chain(Cached, 6, nn.Linear(16, 16), nn.Linear(16, 4)),
        Hidden,
        lambda: Hidden(WarmBlock, lambda: nn.Linear(16, 16)),
    ],
    ids=["cache-in-the-block", "flag-before-the-chain-then-run-again", "flag-in-the-block"],
)
def test_state_a_forward_sets_on_the_model(build, monkeypatch):
    """A block whose forward sets an attribute (a cache, a flag) is not written from another (its
    stand-ins would set none: the cache's storage was missing, ops counted 681 for 685); and the step
    run again starts from the model's attributes as the first run found them (the stem's flag, set in
    the run given up, left out its op: 749 ops for 751)."""
    off, on = _both(build(), (torch.randn(2, 5, 16),), monkeypatch)
    assert "reused_blocks" not in on
    assert _figures(off) == _figures(on)


class Kept(nn.Module):
    """The model keeps one middle block's output on itself (a feature for later), with no op between
    the blocks: the exact run frees it only when the attribute lets it go."""

    def __init__(self, make, stem, head):
        super().__init__()
        self.stem, self.blocks, self.head = stem, nn.Sequential(*(make() for _ in range(7))), head

    def forward(self, x):
        x = self.stem(x)
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i == 2:
                self.feature = x
        return self.head(x)


@pytest.mark.parametrize("make", [mlp_chain, conv_chain], ids=["input-kept", "output-kept"])
def test_a_middle_output_held_outside_the_chain(make, monkeypatch):
    """Block 2's output is block 3's input: a stand-in freed it where its template frees its own
    (Mlp: block 3's input, peak 133,680 bytes for 134,320; Bottle: block 2's output, saved by its
    ReLU), though the model still held it. Its free is now the tensor's own: held, the step runs
    again exactly."""
    model, args = make()
    kept = Kept(type(model.blocks[0]), model.stem, model.head)
    off, on = _both(kept, args, monkeypatch)
    assert "reused_blocks" not in on
    assert any("held outside the chain" in n for n in on["notes"])
    assert _figures(off) == _figures(on)


def _events(tracker) -> tuple:
    """Everything a first step's tracker holds of its events, in order."""

    def rec(r):
        return (r.nbytes, r.born, r.op, r.phase, r.module, r.died, r.kind, r.skippable)

    return (
        [rec(r) for r in tracker.records],
        [rec(r) for r in tracker.transients],
        list(tracker.timeline),
        tracker.op_names,
        tracker.op_phase,
        tracker.op_module,
        (tracker.events, tracker.ops, tracker.live_bytes, tracker.peak, tracker.peak_event, tracker.peak_op),
    )


@pytest.mark.parametrize("make", [mlp_chain, conv_chain], ids=["mlp", "conv"])
@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "h100"])
def test_the_stand_ins_write_every_event_of_the_exact_run(make, gpu, monkeypatch):
    """Below the figures: each record (bytes, birth, op, phase, module, death), transient, timeline
    figure, op name, phase and module and the peak's event the stand-ins write (from a program
    compiled once a chain) are those the exact run's tracker holds after the first step."""
    from archlint.devices import resolve

    model, args = make(n=8)
    kwargs = {"device_spec": resolve("h100-sxm"), "optimizer": "adamw"} if gpu else {}
    seen = []
    active = blocks.Reuse.active

    def spy(self, tracker, *rest):
        seen.append(tracker)
        return active(self, tracker, *rest)

    monkeypatch.setattr(blocks.Reuse, "active", spy)
    off, on = _both(model, args, monkeypatch, **kwargs)
    assert on["reused_blocks"][0]["reused"] == "2-5"
    assert len(seen) == 2  # one first step each way: no second run
    assert _events(seen[0]) == _events(seen[1])


def _replayed(tracker, span, prefix: str) -> None:
    """A span written event by event through the tracker's own calls (what `_write` must equal)."""
    recs = []
    for o in (None, *span.ops):
        if o is not None:
            tracker.ops += 1
            tracker.op_names.append(o.name)
            tracker.op_phase.append(tracker.phase)
            tracker.op_module.append(prefix + o.module[1])
        for item in span.pre if o is None else o.items:
            if item[0] == "f":
                tracker.timeline.append((tracker.ops - 1, tracker.live_bytes + o.extra))
            elif item[0] == "b":
                recs.append(tracker.born(item[1]))
                recs[-1].module = prefix + item[2][1]
            elif item[0] == "t":
                tracker.transient(item[1], item[2])
            else:
                tracker.died(recs[item[1][1]])


def _first_step_trackers(monkeypatch) -> list:
    """The first step's tracker of a run of `mlp_chain` (a tracker to write into `like` it)."""
    seen: list = []
    active = blocks.Reuse.active
    monkeypatch.setattr(
        blocks.Reuse, "active", lambda self, tracker, *rest: seen.append(tracker) or active(self, tracker, *rest)
    )
    step_memory(*mlp_chain())
    return seen


@pytest.mark.parametrize("peak", [0, 1450, 10_000], ids=["peak-in-span", "peak-tied-before", "peak-before"])
def test_a_programs_events_are_the_trackers_own(peak, monkeypatch):
    """`_write`'s one-pass records, figures and peak (the first event to reach the span's highest
    point: two transients reach 1450 bytes, the first is the peak) against the same events through
    `born`, `transient`, `died`."""
    seen = _first_step_trackers(monkeypatch)
    rel = ("rel", ".fc")
    ops = [
        blocks._Op("aten::mm", rel, [("b", 100, rel), ("f",)], 0),
        blocks._Op("aten::gelu", ("rel", ""), [("t", 350, False), ("b", 50, rel), ("f",)], 30),
        blocks._Op("aten::add", rel, [("f",), ("d", ("span", 0))], 0),
        blocks._Op("aten::mm", rel, [("b", 350, rel), ("t", 50, True), ("f",), ("d", ("span", 1))], 8),
        blocks._Op("aten::view", rel, [("f",)], 0),
    ]
    span = blocks._Span("forward", [], ops, 3, [2])
    trackers = []
    for write in (True, False):
        tracker = seen[0].like()
        tracker.born(1000)  # what the step holds before the span
        tracker.peak = max(tracker.peak, peak)  # the span reaches 1450 bytes
        if write:
            blocks._write(tracker, blocks._compile(span, {}), "blocks.3", {}, {})
        else:
            _replayed(tracker, span, "blocks.3")
        trackers.append(tracker)
    assert _events(trackers[0]) == _events(trackers[1])


@pytest.mark.parametrize("held", [False, True], ids=["ours-alone", "held-elsewhere"])
def test_a_programs_input_free_is_the_tensors_own(held, monkeypatch):
    """A compiled backward frees the stand-in's input by dropping the reference it is given (the
    tensor's own free records the death, at the program's event), never by writing it: where
    something else holds the input, the write says so (the step then runs again exactly)."""
    seen = _first_step_trackers(monkeypatch)
    rel = ("rel", ".fc")
    ops = [
        blocks._Op("aten::mm", rel, [("b", 64, rel), ("f",)], 0),
        blocks._Op("aten::add", rel, [("d", ("in",)), ("f",)], 0),
    ]
    span = blocks._Span("backward", [], ops, 1, [0])
    tracker = seen[0].like()
    tracker.born(1000)
    x = torch.empty(16, device="meta")
    rec = tracker.see(x)
    program = blocks._compile(span, {"in": rec.nbytes})
    assert program.drops == [(1, "in")] and program.deaths == []
    elsewhere = [x] if held else []
    named = {"in": x}
    del x
    e0 = tracker.events
    if held:
        with pytest.raises(blocks._Off, match="held outside the chain"):
            blocks._write(tracker, program, "blocks.3", {"in": rec}, {}, named)
        assert rec.died == float("inf") and elsewhere
        return
    blocks._write(tracker, program, "blocks.3", {"in": rec}, {}, named)
    assert rec.died == e0 + 1 and not named
    assert (tracker.events, tracker.live_bytes) == (e0 + 2, 1000 + 64)


def test_a_global_module_hook_of_the_users_means_no_reuse(monkeypatch):
    """A hook registered for every module runs in the exact instances' submodules and not in a
    stand-in's (it may make tensors, count calls): with one registered no chain is stood in for."""
    from torch.nn.modules.module import register_module_forward_hook

    model, args = mlp_chain()
    calls = []
    handle = register_module_forward_hook(lambda module, inputs, output: calls.append(type(module).__name__))
    try:
        off, on = _both(model, args, monkeypatch)
    finally:
        handle.remove()
    assert "reused_blocks" not in on and _figures(off) == _figures(on)
    assert blocks.Reuse(model, {}, None, True).chains == []  # the hook's still off: checked at the start
    on_again = _both(model, args, monkeypatch)[1]
    assert "reused_blocks" in on_again  # without it, reused


def test_an_error_of_ours_in_a_check_is_said_and_the_step_exact(monkeypatch):
    """A check that raises something other than an unmet premise (a defect of ours) does not pass
    silently: the step runs again exactly and the notes say why."""
    model, args = mlp_chain()

    def broken(self, k, x, args):
        raise KeyError("boom")

    monkeypatch.setattr(blocks._Chain, "_check_stand_in", broken)
    off, on = _both(model, args, monkeypatch)
    assert "reused_blocks" not in on and _figures(off) == _figures(on)
    assert any("repeated blocks: run exactly" in n and "unforeseen KeyError" in n for n in on["notes"])


@pytest.mark.parametrize("n", [6, 3], ids=["reused", "too-short"])
def test_the_step_is_freed_by_its_reference_counts(n):
    """No cycle keeps the meta model, its tensors or the trackers alive once the step is read (the
    chains held their Reuse, which held the tracker that held it): with the cyclic collector off, as
    the step runs (archlint.collector), they were freed only at its next pass, after the run."""
    import gc

    from archlint.model.train.memory import _Storage

    model, args = mlp_chain(n)
    model.train()
    step_memory(model, args)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = step_memory(model, args)
        assert ("reused_blocks" in result) == (n == 6)
        del result
        gc.collect()
        kept = [type(o).__name__ for o in gc.garbage if isinstance(o, (nn.Module, torch.Tensor, _Storage))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert kept == []


# -- the chain finder against its plain definition ------------------------------------------------
# (blocks._chains reads each candidate once and only as far as a comparison needs; these are the
# definitions it stands for, written with torch's own walks, pair by pair)


def _plain_signature_ok(m):
    hooks = (*blocks._HOOKS,)
    if "forward" in vars(m) or any(getattr(m, h, None) for h in hooks):
        return False
    return not any(
        p is not None and (p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None))
        for p in m._parameters.values()
    )


def _plain_same(a, b, depth=0):
    if a is b:
        return True
    if type(a) is not type(b) or depth > 4:
        return False
    if type(a) in blocks._PLAIN_TYPES:
        return a == b
    if isinstance(a, (dict, set, frozenset)) and not a and not b:
        return True
    if isinstance(a, torch.Tensor):
        return blocks._layout(a) == blocks._layout(b) and a.device == b.device
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_plain_same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, (set, frozenset)):
        return a == b and all(type(x) in blocks._PLAIN_TYPES for x in a)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_plain_same(a[k], b[k], depth + 1) for k in a)
    return False


def _plain_same_instance(a, b):
    ma, mb = list(a.named_modules()), list(b.named_modules())
    if len(ma) != len(mb):
        return False
    for (na, x), (nb, y) in zip(ma, mb):
        if na != nb or type(x) is not type(y):
            return False
        for mine, theirs in ((x._parameters, y._parameters), (x._buffers, y._buffers)):
            if [(k, None if t is None else blocks._held(t)) for k, t in mine.items()] != [
                (k, None if t is None else blocks._held(t)) for k, t in theirs.items()
            ]:
                return False
    for (_, x), (_, y) in zip(ma, mb):
        if not (_plain_signature_ok(x) and _plain_signature_ok(y)):
            return False
        va, vb = vars(x), vars(y)
        if list(va) != list(vb):
            return False
        if not all(k in blocks._MODULE_OWN or _plain_same(va[k], vb[k]) for k in va):
            return False
    return True


class _OwnWalk(nn.Sequential):
    """A container whose named_modules hides its second child (torch's methods must then be called)."""

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        yield prefix, self
        yield from self[0].named_modules(memo, prefix + ("." if prefix else "") + "0", remove_duplicate)


def _variants():
    """name -> (a change to each block of a chain, given whether it is the odd one; whether the odd one
    then differs): each premise the finder checks, and values `_same` tells apart or not."""

    def attr(name, common, odd_value, differs):
        return (lambda b, odd: setattr(b.fc1, name, odd_value() if odd else common())), differs

    def only(change, differs=True):
        return (lambda b, odd: change(b) if odd else None), differs

    nan = float("nan")
    shared = object()
    bias = nn.Parameter(torch.zeros(16))
    return {
        "same": only(lambda b: None, False),
        "forward-hook": only(lambda b: b.fc2.register_forward_hook(lambda *a: None)),
        "pre-hook": only(lambda b: b.norm.register_forward_pre_hook(lambda *a: None)),
        "param-hook": only(lambda b: b.fc1.weight.register_hook(lambda g: g)),
        "post-accumulate-hook": only(lambda b: b.norm.weight.register_post_accumulate_grad_hook(lambda p: None)),
        "instance-forward": only(lambda b: setattr(b.act, "forward", lambda x: x)),
        "new-attr": only(lambda b: setattr(b.fc1, "flag", 1)),
        "int-vs-bool": attr("flag", lambda: 1, lambda: True, True),
        "float-vs-int": attr("scale", lambda: 1, lambda: 1.0, True),
        "nan-objects": attr("scale", lambda: float("nan"), lambda: float("nan"), True),
        "nan-shared": attr("scale", lambda: nan, lambda: nan, False),
        "nan-in-tuple": attr("scale", lambda: (nan, 1), lambda: (nan, 1), False),
        "tuple": attr("kernel", lambda: (3, (1, True)), lambda: (3, (1, True)), False),
        "tuple-bool": attr("kernel", lambda: (3, (1, True)), lambda: (3, (1, 1)), True),
        "tuple-deep": attr("kernel", lambda: ((((1,),),),), lambda: ((((1,),),),), False),
        # (a float made at each call: equal, not the same object, one level deeper than `_same` compares)
        "tuple-too-deep": attr(
            "kernel", lambda: (((((float("1.5"),),),),),), lambda: (((((float("1.5"),),),),),), True
        ),
        "tuple-deep-float": attr("kernel", lambda: ((((float("1.5"),),),),), lambda: ((((float("1.5"),),),),), False),
        "list-vs-tuple": attr("kernel", lambda: (3, 3), lambda: [3, 3], True),
        "size": attr("kernel", lambda: torch.Size([3, 3]), lambda: torch.Size([3, 3]), False),
        "empty-dict": attr("cache", dict, dict, False),
        "dict": attr("cache", lambda: {"a": (1, 2)}, lambda: {"a": (1, 2)}, False),
        "dict-order": attr("cache", lambda: {"a": 1, "b": 2}, lambda: {"b": 2, "a": 1}, True),
        "set": attr("cache", lambda: {1, 2}, lambda: {1, 2}, False),
        "set-differs": attr("cache", lambda: {1, 2}, lambda: {1, 3}, True),
        "empty-vs-set": attr("cache", set, lambda: {1}, True),
        "frozen-set": attr("cache", lambda: frozenset({True}), lambda: frozenset({1}), False),
        "tensor": attr("mask", lambda: torch.zeros(2, 3), lambda: torch.ones(2, 3), False),
        "tensor-layout": attr("mask", lambda: torch.zeros(2, 3), lambda: torch.zeros(3, 2), True),
        "object": attr("fn", object, object, True),
        "object-shared": attr("fn", lambda: shared, lambda: shared, False),
        "dtype": attr("dtype", lambda: torch.float32, lambda: torch.float16, True),
        "attr-order": only(lambda b: (setattr(b.fc1, "zz", 1), setattr(b.fc1, "yy", 2))),
        "no-bias": only(lambda b: setattr(b.fc1, "bias", None)),
        "extra-buffer": only(lambda b: b.fc1.register_buffer("count", torch.zeros(()))),
        "none-buffer": only(lambda b: b.fc1.register_buffer("count", None)),
        "frozen": only(lambda b: b.fc1.requires_grad_(False)),
        "tied": only(lambda b: setattr(b.fc2, "bias", b.norm.bias), False),  # (one parameter in two places)
        "tied-across": ((lambda b, odd: setattr(b.fc2, "bias", bias)), False),  # (in every block: no chain)
        "extra-module": only(lambda b: setattr(b, "extra", nn.Identity())),
        "none-module": only(lambda b: b.add_module("extra", None), False),
        "shared-submodule": only(lambda b: setattr(b, "again", b.fc1), False),
    }


def _reference_runs(model, container, paths):
    """Runs of at least MIN_CHAIN consecutive children the same block, each compared with its run's
    first; a run left out where a module of it is reached by another path or a parameter is in
    another place too."""
    children = list(container._modules.items())
    runs, run = [], [children[0]]
    for item in children[1:]:
        if type(item[1]) is type(run[0][1]) and _plain_same_instance(run[0][1], item[1]):
            run.append(item)
            continue
        runs.append(run)
        run = [item]
    runs.append(run)
    out, seen = [], set()
    for run in (r for r in runs if len(r) >= blocks.MIN_CHAIN):
        ok = True
        for _, block in run:
            base = paths[id(block)]
            ok = ok and all(paths[id(m)] == (f"{base}.{p}" if p else base) for p, m in block.named_modules())
            for p in block.parameters():
                ok = ok and id(p) not in seen
                seen.add(id(p))
        if ok:
            out.append([n for n, _ in run])
    return out


@pytest.mark.parametrize("where", [0, 3, 7])
@pytest.mark.parametrize("variant", sorted(_variants()))
def test_the_chain_finder_agrees_with_its_definition(variant, where):
    """Each premise the chain finder checks, broken in one block (the first, one inside, the last):
    the same runs as torch's walks and a comparison pair by pair find; a different block
    ends a run there. Its walks, parameters and buffers are torch's."""
    model = Chain(Mlp, 8, nn.Linear(16, 16), nn.Linear(16, 4))
    change, differs = _variants()[variant]
    for i, block in enumerate(model.blocks):
        change(block, i == where)
    for sub in (model.blocks[1], model.blocks[where]):  # (the same for the other blocks)
        b = blocks._Block(sub, False)
        assert b.modules() == list(sub.named_modules())
        assert b.named("_parameters") == list(sub.named_parameters())
        assert b.named("_buffers") == list(sub.named_buffers())
    other = 1 if where != 1 else 2
    assert _plain_same_instance(model.blocks[other], model.blocks[where]) != differs  # (the variant does what it says)
    paths = {id(m): p or "<model>" for p, m in model.named_modules()}
    found = [(path, [n for n, _ in run]) for path, run in blocks._chains(model, paths)]
    assert found == [("blocks", names) for names in _reference_runs(model, model.blocks, paths)]


@pytest.mark.parametrize("odd", [(), (4,), (5,), (9,), (4, 5), (3, 10), (4, 11), (6, 12), (0, 7, 14), (2, 5, 8, 11)])
def test_the_chain_finder_finds_each_run_from_the_pairs_it_looks_at(odd):
    """blocks._same_runs compares neighbours at every MIN_CHAIN - 1 places and looks for a run only
    where they are the same block: each run found, wherever the blocks that end runs stand."""
    model = Chain(Mlp, 16, nn.Linear(16, 16), nn.Linear(16, 4))
    for i in odd:
        model.blocks[i].fc1 = nn.Linear(16, 24 + i)
        model.blocks[i].fc2 = nn.Linear(24 + i, 16)
    paths = {id(m): p or "<model>" for p, m in model.named_modules()}
    found = [(path, [n for n, _ in run]) for path, run in blocks._chains(model, paths)]
    assert found == [("blocks", names) for names in _reference_runs(model, model.blocks, paths)]
    assert found or max(b - a for a, b in zip((-1, *odd), (*odd, 16))) - 1 < blocks.MIN_CHAIN


def test_the_chain_finder_calls_a_models_own_walk():
    """A module whose class walks its modules its own way (named_modules of its own): its own walk
    counts, as torch's named_modules would call it."""
    model = nn.Sequential(*(_OwnWalk(Mlp(), Mlp()) for _ in range(6)))
    model[2][1].fc1 = nn.Linear(16, 24)  # hidden by the walk: not compared
    paths = {id(m): p or "<model>" for p, m in model.named_modules()}
    ((path, run),) = blocks._chains(model, paths)
    assert [n for n, _ in run] == [str(i) for i in range(6)]
    assert all(b.torch_walk and b.modules() == list(b.module.named_modules()) for _, b in run)


@pytest.mark.parametrize(
    "a, b",
    [
        ((1, 2), (1, 2)),
        ((1, 2), (1, True)),
        ((1, 2), (1.0, 2)),
        ((1, 2), [1, 2]),
        ((float("nan"),), (float("nan"),)),
        (((1, 2), 3), ((1, 2), 3)),
        ((((((1,),),),),), (((((1,),),),),)),
        ((("a", None, torch.float32),), (("a", None, torch.float32),)),
        ((torch.device("cpu"),), (torch.device("meta"),)),
        (torch.Size([2, 3]), torch.Size([2, 3])),
        ([1, [2, 3]], [1, [2, 3]]),
        ((1, 2), (1, 2, 3)),
    ],
)
def test_same_plain_items_at_once(a, b):
    """`_same`'s shortcut for tuples and lists of plain items (one comparison) agrees with the item-by-item
    definition, at every depth."""
    for depth in range(6):
        assert blocks._same(a, b, depth) == _plain_same(a, b, depth)
        assert blocks._same((a,), (b,), depth) == _plain_same((a,), (b,), depth)


def test_tensors_made_untracked_are_no_ops_of_the_step():
    """`_untracked` (the Python dispatch keys excluded) keeps a mode from seeing the tensors made and
    the values copied inside it, as torch's _disable_current_modes does, and the mode sees ops again after."""
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    seen = []

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    grad = torch.empty(4, 6, device="meta")[1:]  # a view: fresh_like's other way
    value = torch.arange(3.0)
    made = {}
    with Seen():
        for name, way in (("untracked", blocks._untracked), ("popped", _disable_current_modes)):
            with way():
                made[name] = (blocks.steady.fresh_like(grad), value.clone(), torch.equal(value, value))
            assert seen == []
        torch.empty(1, device="meta")
    assert seen == ["aten.empty.memory_format"]
    for (a, b, c), (x, y, z) in [(made["untracked"], made["popped"])]:
        assert blocks._layout(a) == blocks._layout(x) and torch.equal(b, y) and c == z
