"""What makes a warning, for every model rule alike (archlint/model/checks/_verdict.py), checked
over torchvision and a timm sample as the default run sees them:

- no warning under the materiality floor (1% of the model on its price's basis);
- no warning at the model's root without the op chain it prices;
- no warning with a missing, zero or negative price, and no AL102 finding with a negative price;
- an alternative that changes the model (retrain) is info and says so.

A small sample runs unmarked; the full torchvision zoo and a wider timm set are slow-marked.
"""

from __future__ import annotations

import pytest
import torch
import torchvision

from archlint.config import Settings
from archlint.diagnostics import Severity
from archlint.model.analyze import analyze_model
from archlint.model.checks._verdict import FLOOR, located

from ._graphs import findings
from .test_torchvision_noise import build

TV_SAMPLE = ("resnet18", "regnet_y_400mf", "shufflenet_v2_x1_0")
TIMM_SAMPLE = ("convnext_atto",)
TIMM_MORE = (
    "edgenext_x_small",
    "mobilevit_xxs",
    "efficientformerv2_s0",
    "pvt_v2_b0",
    "repvit_m1",
    "fastvit_t8",
    "levit_128s",
    "tiny_vit_5m_224",
)


def assert_invariants(found):
    for d in found:
        p = d.price
        if d.code == "AL102":
            assert p is not None and (p.mac_bytes_saved or 0) >= 0 and (p.saving_ms or 0) >= 0, d
        if d.evidence.get("changes_model"):
            assert d.severity is Severity.INFO and "retrain" in d.message, d
        if d.severity is not Severity.WARNING:
            continue
        assert p is not None and p.pays, d
        assert (p.mac_bytes_saved or 0) >= 0 and (p.saving_ms is None or p.saving_ms > 0), d
        assert p.saving_share >= FLOOR, d
        assert located(d), d


def run_tv(name: str):
    model, inputs = build(name)
    graph, _ = analyze_model(model, inputs, Settings())
    return findings(graph)


def run_timm(name: str):
    timm = pytest.importorskip("timm")
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False).eval()
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    graph, _ = analyze_model(model, (torch.randn(1, *size, device="meta"),), Settings())
    return findings(graph)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", TV_SAMPLE)
def test_invariants_torchvision_sample(name):
    found = run_tv(name)
    assert_invariants(found)
    if name == "regnet_y_400mf":  # its grouped convs: AL102 findings, none with a negative price
        assert [d for d in found if d.code == "AL102"]


@pytest.mark.parametrize("name", TIMM_SAMPLE)
def test_invariants_timm_sample(name):
    assert_invariants(run_timm(name))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize(
    "name", [m for m in torchvision.models.list_models(module=torchvision.models) if m not in TV_SAMPLE]
)
def test_invariants_torchvision_zoo(name):
    assert_invariants(run_tv(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", TIMM_MORE)
def test_invariants_timm_more(name):
    assert_invariants(run_timm(name))
