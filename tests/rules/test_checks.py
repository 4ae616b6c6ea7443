"""Behaviour of each model rule on small models captured with archlint's own layers: what fires,
what stays silent, the evidence and price each finding carries, and where it points."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from archlint.diagnostics import Severity

from ._graphs import findings, opgraph


def run(model, shape, code, **kw):
    return [d for d in findings(opgraph(model, shape, **kw)) if d.code == code]


class Seq(nn.Sequential):
    """A Sequential with a distinct class name (so it is not a container block)."""


# ---- AL202 redundant-relu --------------------------------------------------------------------


class Fn(nn.Module):
    def __init__(self, f, c=8):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.f = f

    def forward(self, x):
        return self.f(self.conv(x))


@pytest.mark.parametrize(
    ("f", "fires"),
    [
        (lambda x: torch.relu(torch.relu(x)), True),
        (lambda x: torch.relu(torch.sigmoid(x)), True),
        (lambda x: torch.relu(nn.functional.max_pool2d(torch.relu(x), 2)), True),
        (lambda x: torch.relu(nn.functional.dropout(torch.relu(x).flatten(1), 0.1, False)), True),
        (lambda x: torch.relu(torch.cat([torch.relu(x), torch.sigmoid(x)], 1)), True),
        (lambda x: nn.functional.relu6(torch.relu(x)), True),  # relu6 clamps at 0 already
        (lambda x: nn.functional.leaky_relu(torch.relu(x)), True),
        (lambda x: torch.relu(x), False),
        (lambda x: torch.relu(torch.cat([torch.relu(x), x], 1)), False),  # one input may be negative
        (lambda x: torch.relu(torch.tanh(x)), False),
        (lambda x: nn.functional.gelu(torch.relu(x)), False),  # gelu is not the identity on x >= 0
        (lambda x: torch.sigmoid(torch.relu(x)), False),  # changes values: not redundant
        (lambda x: torch.relu(torch.relu(x) - 1), False),
    ],
)
def test_al202_cases(f, fires):
    assert bool(run(Fn(f), (1, 3, 16, 16), "AL202")) == fires


def test_al202_price_is_the_activation_mac():
    (d,) = run(Fn(lambda x: torch.relu(torch.relu(x))), (1, 3, 16, 16), "AL202")
    assert d.price.mac_bytes_saved == d.evidence["mac_bytes"] == 2 * 8 * 16 * 16 * 4  # read + write, fp32
    assert d.evidence["activation"] == "relu" and d.price.saving_ms is None and d.price.basis == "static"


# ---- AL201 unused-module ---------------------------------------------------------------------


class WithAux(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3)
        self.aux_head = nn.Linear(8, 10)
        self.dead = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.unused_act = nn.ReLU()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        y = self.body(x).mean((2, 3))
        if self.training:
            return y, self.aux_head(y)
        return y


def test_al201_says_bytes_as_every_output_says_them():
    class Spare(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.spare = nn.Linear(4, 4), nn.Linear(32, 32)

        def forward(self, x):
            return self.used(x)

    (d,) = [d for d in run(Spare(), (1, 4), "AL201") if d.module == "spare"]
    assert "1,056 parameters (4.22 KB)" in d.message  # archlint.units: decimal, as the reports (not KiB)


def test_al201_dead_code_and_aux_head_in_eval():
    found = {d.module: d for d in run(WithAux(), (1, 3, 8, 8), "AL201")}
    assert set(found) == {"aux_head", "dead", ""}  # "" : the parameter `scale` no op reads
    assert found["dead"].evidence["params"] == 144
    # dead code saves no time: no priced saving, so info under the materiality rule (issue 26)
    assert found["dead"].severity is Severity.INFO and "no saving" in found["dead"].evidence["verdict"]
    assert "eval-mode" in found["dead"].message
    aux = found["aux_head"]
    assert aux.severity is Severity.INFO and aux.evidence["train_only"] and "auxiliary head" in aux.message
    assert found[""].evidence["parameter"] == "scale"


def test_al201_train_mode_reaches_the_aux_head():
    found = {d.module for d in run(WithAux(), (2, 3, 8, 8), "AL201", mode="train")}
    assert found == {"dead", ""}


def test_al201_multihead_attention_children_are_used():
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    assert run(Attn(), (1, 5, 16), "AL201") == []


def test_al201_parameterless_option():
    settings = _settings({"AL201": {"parameterless": True}})
    graph = opgraph(WithAux(), (1, 3, 8, 8))
    assert "unused_act" in {d.module for d in findings(graph, settings) if d.code == "AL201"}


# ---- AL203 redundant-shortcut ----------------------------------------------------------------


class Dense(nn.Module):
    def __init__(self, c=8, growth=4, layers=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Conv2d(c + i * growth, growth, 3, padding=1) for i in range(layers))

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


class Cheap(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y + torch.relu(y)


def test_al203_dense_connections():
    (d,) = run(Dense(), (1, 8, 16, 16), "AL203")
    assert d.evidence["form"] == "dense" and d.evidence["concats"] == 5 and d.evidence["max_reuse"] == 5
    assert d.price.mac_bytes_saved == d.evidence["concat_mac_bytes"] - d.evidence["one_shot_mac_bytes"] > 0


def test_al203_cheap_branch_and_silence_on_real_residuals():
    (d,) = run(Cheap(), (1, 3, 16, 16), "AL203")
    assert d.evidence["form"] == "cheap-branch"
    import torchvision

    assert run(torchvision.models.resnet18(), (1, 3, 64, 64), "AL203") == []


# ---- AL204 / AL205 ---------------------------------------------------------------------------


class ConvBN(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, bias=bias)
        self.bn = nn.BatchNorm2d(16)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_al204_and_al205():
    with_bias = {d.code: d for d in findings(opgraph(ConvBN(True), (1, 3, 16, 16)))}
    assert with_bias["AL204"].evidence["bias_parameters"] == 16
    assert with_bias["AL205"].evidence["pairs"] == 1 and with_bias["AL205"].severity is Severity.INFO
    without = {d.code for d in findings(opgraph(ConvBN(False), (1, 3, 16, 16)))}
    assert "AL204" not in without and "AL205" in without
    # Training mode: BN uses batch statistics and cannot be folded.
    assert "AL205" not in {d.code for d in findings(opgraph(ConvBN(False), (2, 3, 16, 16), mode="train"))}


# ---- AL105 misaligned-channels ---------------------------------------------------------------


def test_al105_only_in_half_precision():
    model = nn.Sequential(nn.Conv2d(3, 30, 3), nn.Conv2d(30, 60, 3))
    assert run(model, (1, 3, 16, 16), "AL105") == []
    found = run(model.to(torch.bfloat16), (1, 3, 16, 16), "AL105", dtype=torch.bfloat16)
    (d,) = found  # one finding listing the layers
    assert {layer["module"]: sorted(k for k in layer if "channels" in k) for layer in d.evidence["layers"]} == {
        "0": ["out_channels"],  # in_channels=3 is the image's, not judged
        "1": ["in_channels", "out_channels"],  # 30 and 60 are not multiples of 8
    }
    settings = _settings({"AL105": {"multiple": 2}})
    assert [
        d for d in findings(opgraph(model, (1, 3, 16, 16), dtype=torch.bfloat16), settings) if d.code == "AL105"
    ] == []


# ---- locations, sorting, pricing -------------------------------------------------------------


def test_findings_point_at_the_module_class_source_and_sort_by_price():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "models"))
    import shufflenet_tables as tables

    r = tables.row("1:12")
    found = findings(opgraph(r.build(), r.input_shape))
    # At the user's block class (PairBlock in the fixture file), not at torch's Conv2d.
    line = inspect.getsourcelines(tables.PairBlock)[1]
    assert found and {(d.file, d.line) for d in found if d.code == "AL101"} == {(tables.__file__, line)}
    keys = [d.price.mac_bytes_saved or 0 for d in found]
    assert keys == sorted(keys, reverse=True)


def _settings(rule_options=None, module_ignores=None):
    from archlint.config import Settings

    return Settings(rule_options=rule_options or {}, module_ignores=module_ignores or {})
