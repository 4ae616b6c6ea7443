"""Per-rule context and the claims pass: each rule judges what it reports in its context (AL101
with its partner convs, AL102 at the same interface, AL103 only small fragments and blocks the
model repeats, AL104 on what fusion removes, AL205 on Linear+BatchNorm1d and re-parameterisable
blocks), and one op's saving goes to one finding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archlint.diagnostics import Price, Severity
from archlint.model.checks import _locate, _query, _verdict, check_modules

from ._graphs import findings, opgraph


def by_code(model, shape, **kw):
    out: dict[str, list] = {}
    for d in findings(opgraph(model.eval(), shape), **kw):
        out.setdefault(d.code, []).append(d)
    return out


# ---- AL101: chains, never a pair alone -------------------------------------------------------


class InvertedResidual(nn.Module):
    def __init__(self, c=24, t=6):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(c, c * t, 1, bias=False),
            nn.BatchNorm2d(c * t),
            nn.ReLU6(),
            nn.Conv2d(c * t, c * t, 3, padding=1, groups=c * t, bias=False),
            nn.BatchNorm2d(c * t),
            nn.ReLU6(),
            nn.Conv2d(c * t, c, 1, bias=False),
            nn.BatchNorm2d(c),
        )

    def forward(self, x):
        return x + self.block(x)


def test_al101_silent_on_expand_project_pairs_and_stems():
    model = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), *(InvertedResidual() for _ in range(3)))
    assert "AL101" not in by_code(model, (1, 3, 32, 32))


def test_al101_chain_through_depthwise_keeps_interface_and_flops():
    # 16 → 256 → (depthwise) → 16 → 256 → 16: interior widths free, ends kept.
    model = nn.Sequential(
        nn.Conv2d(16, 256, 1),
        nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1, groups=256),
        nn.Conv2d(256, 16, 1),
        nn.Conv2d(16, 256, 1),
        nn.Conv2d(256, 16, 1),
    )
    (d,) = by_code(model, (1, 16, 28, 28))["AL101"]
    widths, alt = d.evidence["widths"], d.evidence["balanced_widths"]
    assert widths == [16, 256, 16, 256, 16] and alt[0] == 16 and alt[-1] == 16 and len(set(alt[1:-1])) == 1
    assert abs(d.evidence["balanced_flops"] / d.evidence["flops"] - 1) < 0.1
    assert "in 16, out 16 kept" in d.price.alternative


# ---- AL102: same interface, fewer groups ------------------------------------------------------


def test_al102_alternative_keeps_channels_and_is_info_statically():
    model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.Conv2d(64, 64, 1, groups=16), nn.ReLU())
    (d,) = by_code(model, (1, 3, 32, 32))["AL102"]
    assert "the same conv 64→64 with groups=8" in d.price.alternative
    # fewer groups read more weights: no static saving, reported as 0 (never a negative price)
    assert d.price.mac_bytes_saved == 0 and d.evidence["extra_weight_bytes"] > 0 and d.severity is Severity.INFO


# ---- AL103: small fragments, repeated Sequential items, no overlapping regions -----------------


def small_block():
    return nn.Sequential(*(nn.Conv2d(8, 8, 1) for _ in range(5)))


def test_al103_recognises_plain_sequential_items_as_blocks():
    model = nn.Sequential(small_block(), nn.ReLU(), small_block(), nn.ReLU(), small_block())
    (d,) = by_code(model, (1, 8, 8, 8))["AL103"]
    assert d.evidence["form"] == "series" and d.evidence["instances"] == ["0", "2", "4"]


def test_al103_big_fragments_do_not_count():
    big = nn.Sequential(*(nn.Sequential(*(nn.Conv2d(128, 128, 3, padding=1) for _ in range(5))) for _ in range(2)))
    assert "AL103" not in by_code(big, (1, 128, 56, 56))


class Nested(nn.Module):
    """Four branches, one of which splits again into four: one region reported, not two."""

    def __init__(self):
        super().__init__()
        self.a = nn.ModuleList(nn.Conv2d(8, 2, 1) for _ in range(3))
        self.b = nn.Conv2d(8, 8, 1)
        self.inner = nn.ModuleList(nn.Conv2d(8, 2, 1) for _ in range(4))

    def forward(self, x):
        y = self.b(x)
        inner = torch.cat([m(y) for m in self.inner], 1)
        return torch.cat([m(x) for m in self.a] + [inner], 1)


def test_al103_parallel_regions_never_nest():
    found = by_code(Nested(), (1, 8, 8, 8))["AL103"]
    assert len(found) == 1 and found[0].evidence["form"] == "parallel"


# ---- AL104: fusion's saving, without AL205's BatchNorms or AL202's activations -----------------


class Heavy(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.relu(y)  # redundant: AL202's
        y = y.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)  # data movement
        return (y + x) * 2 + x


def test_al104_counts_data_movement_and_leaves_other_rules_ops_out():
    found = by_code(Heavy(), (1, 8, 32, 32))
    (d,) = found["AL104"]
    bn = next(n for _, n in _query.producer_then_norm(opgraph(Heavy().eval(), (1, 8, 32, 32))))
    assert bn not in d.price.claims  # AL205 folds it
    relu = found["AL202"][0].node
    assert relu not in d.price.claims and d.evidence["counted_by"] == ["AL202"]
    assert any(op.startswith("copy") for op in d.evidence["mac_bytes_by_op"])
    assert d.price.mac_bytes_saved == sum(p[0] for p in d.price.parts.values())


def test_claims_pass_demotes_a_finding_that_reuses_an_owned_op():
    owner = _locate.finding(
        opgraph(nn.Conv2d(3, 8, 1), (1, 3, 8, 8)),
        "AL205",
        "x",
        node="a",
        module="",
        price=Price.static("alt", mac_bytes_saved=10, model_mac_bytes=100, claims=["a"]),
    )
    other = _locate.finding(
        opgraph(nn.Conv2d(3, 8, 1), (1, 3, 8, 8)),
        "AL101",
        "y",
        node="a",
        module="",
        price=Price.static("alt", mac_bytes_saved=50, model_mac_bytes=100, claims=["a", "b"]),
    )
    _verdict.settle([other, owner], {m.CODE: m.PRIORITY for m in check_modules()})
    assert other.severity is Severity.INFO and other.evidence["overlaps"] == ["AL205"]
    assert owner.severity is Severity.WARNING


# ---- AL205: Linear + BatchNorm1d, and re-parameterisable blocks --------------------------------


def test_al205_linear_batchnorm1d():
    model = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    (d,) = by_code(model, (2, 3, 4, 4))["AL205"]
    assert "Linear+BatchNorm pair" in d.message and d.evidence["pairs"] == 1


class RepBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x))

    def reparameterize(self):
        """Fold the BN (as RepVGG/MobileOne blocks do)."""


def test_al205_names_the_models_own_reparameterize():
    (d,) = by_code(nn.Sequential(RepBlock(), RepBlock()), (1, 8, 8, 8))["AL205"]
    assert "RepBlock.reparameterize()" in d.message and d.evidence["reparameterize"] == {"RepBlock": "reparameterize"}


@pytest.mark.filterwarnings("ignore")
def test_al205_on_timm_mobileone_names_reparameterize():
    timm = pytest.importorskip("timm")
    model = timm.create_model("mobileone_s0", pretrained=False)
    (d,) = by_code(
        model,
        (1, 3, 64, 64),
    )["AL205"]
    assert "MobileOneBlock.reparameterize()" in d.message
