"""AL113 layout-roundtrip: a 4-D tensor permuted, run through one op that copies it (or an explicit
.contiguous()), and permuted back. Fires on channels-first LayerNorms and NHWC Linears written via
permutes; silent on designed-in NHWC blocks (ConvNeXt's), element-wise ops between permutes, 1×1
maps and activations converted to channels_last; info on torchvision's ConvNeXt (its LayerNorm2d
copies < 1% of the model each). Priced by the copies: MAC statically, time with --latency."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from archlint.cli import main
from archlint.config import Settings
from archlint.diagnostics import Severity
from archlint.model.analyze import analyze_model

from ._graphs import findings
from .test_torchvision_noise import build


class Roundtrip(nn.Module):
    """conv → permute → `inner` → permute back → conv; `channels_last` converts the input first."""

    def __init__(self, inner: str, channels_last: bool = False, c: int = 32):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.norm = nn.LayerNorm(c)
        self.fc = nn.Linear(c, c)
        self.fc2 = nn.Linear(c, c)
        self.head = nn.Conv2d(c, 8, 1)
        self.inner, self.channels_last = inner, channels_last

    def forward(self, x):
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        y = self.stem(x)
        if self.inner == "layernorm":
            y = self.norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        elif self.inner == "contiguous":
            y = self.norm(y.permute(0, 2, 3, 1).contiguous()).permute(0, 3, 1, 2).contiguous()
        elif self.inner == "linear-transpose":
            y = self.fc(y.transpose(1, 3)).transpose(1, 3)
        elif self.inner == "softmax":
            y = F.softmax(y.permute(0, 2, 3, 1), dim=-1).permute(0, 3, 1, 2)
        elif self.inner == "convnext-block":  # designed-in NHWC: several ops between the permutes
            y = self.fc2(F.gelu(self.fc(self.norm(y.permute(0, 2, 3, 1))))).permute(0, 3, 1, 2)
        elif self.inner == "elementwise":  # element-wise kernels take any strides: nothing copied
            y = F.gelu(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        elif self.inner == "not-back":  # permuted and left so: no round trip
            y = self.norm(y.permute(0, 2, 3, 1)).permute(0, 3, 2, 1)
        return self.head(y)


def al113(model, shape=(2, 3, 16, 16), settings=None):
    graph, _ = analyze_model(model.eval(), (torch.randn(*shape),), settings or Settings())
    return graph, [d for d in findings(graph, settings) if d.code == "AL113"]


@pytest.mark.parametrize(
    "inner, copies", [("layernorm", 1), ("contiguous", 2), ("linear-transpose", 1), ("softmax", 1)]
)
def test_fires_and_prices_the_copies(inner, copies):
    graph, found = al113(Roundtrip(inner))
    (d,) = found
    activation = 2 * 32 * 16 * 16 * 4  # bytes of the 2×32×16×16 float32 activation
    # read + write per copy: an explicit .contiguous()'s own MAC, or the copy inside the op
    assert d.price.mac_bytes_saved == copies * 2 * activation
    assert f"activation {copies}×" in d.message and d.price.basis == "static"
    assert d.severity is Severity.WARNING  # the copies are a large share of this small model
    if inner == "layernorm":
        assert d.evidence["copy_inside_op"] and "channels_last" in d.price.alternative


@pytest.mark.parametrize("inner", ["convnext-block", "elementwise", "not-back"])
def test_silent_without_a_copying_round_trip(inner):
    assert al113(Roundtrip(inner))[1] == []


def test_silent_on_channels_last_and_on_1x1_maps():
    assert al113(Roundtrip("layernorm", channels_last=True))[1] == []
    assert al113(Roundtrip("layernorm"), shape=(2, 3, 1, 1))[1] == []


def test_small_share_is_info():
    settings = Settings(rule_options={"AL113": {"min_saving_share": 0.9}})
    (d,) = al113(Roundtrip("layernorm"), settings=settings)[1]
    assert d.severity is Severity.INFO


@pytest.mark.parametrize("name", ["convnext_tiny"])
def test_torchvision_convnext_layernorm2d_is_one_finding(name):
    graph, _ = analyze_model(*build(name), Settings())
    found = [d for d in findings(graph) if d.code == "AL113"]
    # stem + three downsampling LayerNorm2d, one class: one finding (the classifier's runs on a
    # 1×1 map, no copy). Each is < 1% of the MAC; one fix (run channels_last) saves their sum.
    (d,) = found
    assert d.evidence["repeats"] == ["features.0.1", "features.2.0", "features.4.0", "features.6.0"]
    assert 0.01 < d.price.saving_share < 0.03 and d.severity is Severity.WARNING


def test_latency_prices_by_time(tmp_path, capsys):
    path = tmp_path / "net.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stem = nn.Conv2d(3, 64, 3, padding=1)\n"
        "        self.norm = nn.LayerNorm(64)\n\n"
        "    def forward(self, x):\n"
        "        y = self.stem(x).permute(0, 2, 3, 1).contiguous()\n"
        "        return self.norm(y).permute(0, 3, 1, 2)\n"
    )
    argv = [
        f"{path}:Net",
        "--input-shape",
        "2,3,32,32",
        "--latency",
        "--output-format",
        "json",
        "--exit-zero",
        "--select",
        "AL113",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    (d,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert d["price"]["basis"] == "measured" and d["price"]["saving_ms"] > 0  # the explicit copy, timed
