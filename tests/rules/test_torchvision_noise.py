"""The price contract and no noise, over every torchvision classification model (built on the meta
device, captured, costed and checked by archlint as the default run does):

- every finding has a price with a basis and a named alternative; shares never exceed 100%;
- one op's saving is claimed by one finding (AL205 owns the BatchNorms it folds: AL104 never
  counts them), and the warnings' savings together never exceed the model (its MAC statically,
  its measured latency with --latency, checked on a small sample);
- a ShuffleNetV2 finding (AL101–AL104) is a warning only when its saving is positive and at least
  1% of the model; otherwise info;
- rules stay where they belong: AL202 and AL105 never fire on torchvision; AL201 only on the
  training-only auxiliary heads (info); AL203 only on DenseNet's dense connectivity; AL204 only on
  VGG-BN (one finding listing its convs); AL205 once per model with BatchNorm; AL101 never on a
  two-conv chain (the expand/project pairs of inverted residuals, bottlenecks' reduce/expand).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torchvision

from archlint.config import Settings
from archlint.diagnostics import BASES, Severity
from archlint.model.analyze import analyze_model
from archlint.model.checks import _query

from ._graphs import findings

MODELS = torchvision.models.list_models(module=torchvision.models)
SAMPLE = ("resnet18", "mobilenet_v2", "shufflenet_v2_x1_0", "densenet121", "vgg11_bn", "googlenet", "swin_t")
SHUFFLENET_RULES = ("AL101", "AL102", "AL103", "AL104")


def build(name: str, device: str = "meta"):
    from torchvision.models.regnet import BlockParams

    # RegNet computes its widths with tensors (.tolist()): run that part on the CPU.
    original = BlockParams.__dict__["from_init_params"]

    def on_cpu(cls, *args, **kwargs):
        with torch.device("cpu"):
            return original.__func__(cls, *args, **kwargs)

    BlockParams.from_init_params = classmethod(on_cpu)
    try:
        with torch.device(device):
            model = torchvision.models.get_model(name, weights=None)
    finally:
        BlockParams.from_init_params = original
    size = 299 if name == "inception_v3" else 224
    return model.eval(), (torch.randn(1, 3, size, size, device=device),)


def assert_contract(graph, found, model_ms: float | None = None):
    owned = Counter()
    for d in found:
        p = d.price
        assert p is not None and p.basis in BASES and p.alternative, d
        assert p.saving_share <= 1.0, d
        assert d.module is not None or d.node is not None
        if d.code in SHUFFLENET_RULES and d.severity is Severity.WARNING:
            assert p.pays and p.saving_share >= 0.01, d
        if "overlaps" not in d.evidence:  # a finding naming owned ops is info and says who owns them
            owned.update(set(p.claims))
    assert max(owned.values(), default=1) == 1, [c for c, n in owned.items() if n > 1][:5]
    al104 = [d for d in found if d.code == "AL104"]
    folded = {n for _, n in _query.producer_then_norm(graph)}
    assert all(not (set(d.price.claims) & folded) for d in al104)
    warnings = [d for d in found if d.severity is Severity.WARNING and d.price.pays]
    if model_ms is None:
        assert sum(d.price.mac_bytes_saved or 0 for d in warnings) <= _query.module_mac(graph)
    else:
        assert sum(d.price.saving_ms or 0.0 for d in warnings) <= model_ms


def check_zoo_model(name: str):
    model, inputs = build(name)
    graph, _ = analyze_model(model, inputs, Settings())
    found = findings(graph)
    assert_contract(graph, found)
    by_code: dict[str, list] = {}
    for d in found:
        by_code.setdefault(d.code, []).append(d)
    assert "AL202" not in by_code  # no torchvision model applies an activation that cannot act
    assert "AL105" not in by_code  # fp32
    aux = by_code.get("AL201", [])
    if name in ("googlenet", "inception_v3"):
        assert {m for d in aux for m in d.evidence.get("repeats", [d.module])} == (
            {"aux1", "aux2"} if name == "googlenet" else {"AuxLogits"}
        )
        assert all(d.severity is Severity.INFO and d.evidence["train_only"] for d in aux)
    else:
        assert aux == []
    for d in by_code.get("AL101", []):
        assert len(d.evidence["convs"]) >= 3  # a pair has one interior width, fixed by its FLOPs
    assert {d.evidence["form"] for d in by_code.get("AL203", [])} == ({"dense"} if "densenet" in name else set())
    assert len(by_code.get("AL204", [])) == int(name.endswith("_bn"))  # one finding listing the convs
    has_bn = any("BatchNorm" in (info.get("type") or "") for info in graph.graph["modules"].values())
    assert len(by_code.get("AL205", [])) == int(has_bn)
    return found


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", SAMPLE)
def test_contract_on_a_sample(name):
    check_zoo_model(name)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", [m for m in MODELS if m not in SAMPLE])
def test_contract_on_the_zoo(name):
    check_zoo_model(name)


def measured(name: str):
    from archlint.model.timing.measure import measure

    model, inputs = build(name, "cpu")
    settings = Settings(latency=True, warmup=2, repeat=5)
    graph, _ = analyze_model(model, inputs, settings)
    report = measure(graph, model, inputs, "cpu", settings)
    return graph, findings(graph, settings, pricer=report.pricer), report.end_to_end_ms


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_contract_with_latency():
    graph, found, model_ms = measured("shufflenet_v2_x0_5")
    assert_contract(graph, found, model_ms)
    assert all(d.price.basis in ("measured", "estimated") for d in found if d.code in ("AL104", "AL205"))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0"])
def test_contract_with_latency_sample(name):
    graph, found, model_ms = measured(name)
    assert_contract(graph, found, model_ms)
    # With a measurement, a remaining G1–G4 warning's alternative measured (or estimated) faster.
    for d in found:
        if d.code in SHUFFLENET_RULES and d.severity is Severity.WARNING:
            assert d.price.saving_ms > 0
