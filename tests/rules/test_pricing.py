"""With --latency, findings carry measured prices: the op's latency and share, and a what-if
saving timed with the measure layer's own timer (archlint.model.timing.measure.Pricer)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from archlint.config import Settings
from archlint.model.analyze import analyze_model
from archlint.model.timing.measure import Pricer, measure

from ._graphs import findings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "models"))
import table1_unbalanced as fixture  # noqa: E402


class Redundant(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.relu2 = nn.ReLU()

    def forward(self, x):
        return self.relu2(self.pool(self.relu(self.bn(self.conv(x)))))


def measured(model, shape):
    settings = Settings(latency=True, warmup=2, repeat=5)
    x = torch.randn(*shape)
    graph, _ = analyze_model(model.eval(), (x,), settings)
    report = measure(graph, model, (x,), "cpu", settings)
    assert isinstance(report.pricer, Pricer)
    return graph, report.pricer


def test_findings_carry_measured_latency_and_whatif():
    graph, pricer = measured(Redundant(), (1, 3, 32, 32))
    found = {d.code: d for d in findings(graph, pricer=pricer)}
    for code in ("AL202", "AL204", "AL205"):
        p = found[code].price
        assert p.basis == "measured" and p.device == "cpu" and isinstance(p.saving_ms, float)
        assert p.saving_share <= 1 and p.alternative
    # AL202 removes a whole op: the model timed without it or, inside the noise, the op's own time.
    relu = found["AL202"].node
    alternative = found["AL202"].price.alternative
    if "timed end to end" not in alternative:  # the fallback says it was used
        assert "its own measured time" in alternative
        assert found["AL202"].price.saving_ms == graph.nodes[relu]["latency_ms"]
    # AL205 and AL204 are priced by the model timed end to end with the fix applied.
    assert "timed end to end" in found["AL205"].price.alternative
    assert "timed end to end" in found["AL204"].price.alternative
    assert isinstance(found["AL205"].evidence["whatif_costliest_pair_ms"], float)


def test_balanced_conv_whatif_for_al101():
    graph, pricer = measured(fixture.Net(), fixture.INPUT_SHAPE)
    found = [d for d in findings(graph, pricer=pricer) if d.code == "AL101"]
    assert found and all(d.price.basis == "measured" and isinstance(d.price.saving_ms, float) for d in found)
    assert all(d.evidence["whatif"] == "chain rebuilt at the balanced widths, timed interleaved" for d in found)
    # A what-if's relative saving applies to the chain's in-model time: never more than that.
    for d in found:
        spent = sum(graph.nodes[n]["latency_ms"] for n in d.evidence["convs"])
        assert d.price.saving_ms <= spent * len(d.evidence["instances"]) + 1e-9
    # Sorted by price: measured saving first.
    keys = [d.price.sort_key() for d in found]
    assert keys == sorted(keys, reverse=True)


def test_no_latency_no_measured_price():
    graph, _ = analyze_model(Redundant().eval(), (torch.randn(1, 3, 32, 32),), Settings())
    for d in findings(graph):
        assert d.price.basis == "static" and d.price.saving_ms is None and d.price.device is None


def test_whatif_rebuilds_dilated_and_grouped_convs():
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3),
        nn.Conv2d(16, 160, 3, dilation=2, padding=2),
        nn.Conv2d(160, 16, 1),
        nn.ReLU(),
        nn.Conv2d(16, 160, 1, groups=8),
        nn.Conv2d(160, 16, 1),
    )
    graph, pricer = measured(model, (1, 3, 24, 24))
    found = {d.code: d for d in findings(graph, pricer=pricer)}
    # A chain 3→16→160→16→160→16 with a dilated and a grouped conv, rebuilt and timed.
    assert found["AL101"].price.basis == "measured" and isinstance(found["AL101"].price.saving_ms, float)
    assert (
        found["AL101"].evidence["convs"] == ["_0", "_1", "_2", "_4", "_5"] or len(found["AL101"].evidence["convs"]) == 5
    )
    # The g=8 conv's alternatives (g=4, 2, 1 at the same 16→160) timed; the fastest named.
    assert found["AL102"].evidence["fastest_groups"] in (1, 2, 4)
