"""The published-table benchmark (benchmarks/published_accuracy.py): its tables, its sample, and on
a few models the estimate against timm's published RTX 4090 throughput."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("timm")
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

import published_accuracy as pa  # noqa: E402

TABLE = pa.TABLES / "timm-infer-amp-nchw-pt240-cu124-rtx4090.csv"


def test_tables_parse_and_name_their_device():
    tables = sorted(pa.TABLES.glob("*.csv"))
    assert len(tables) >= 3
    for t in tables:
        rows = pa.read_table(t)
        assert rows and all(r["published"] > 0 and r["batch"] > 0 and r["img"] > 0 for r in rows)
        assert pa.device_of(t) in ("rtx3090", "rtx4090", "rtx5090", "rtx-pro-6000-maxq")
    assert [t.name for t in tables if pa.channels_last(t)] == ["timm-infer-amp-nhwc-pt240-cu124-rtx4090.csv"]
    assert pa.device_of(pa.TABLES / "timm-infer-amp-nchw-pt291-cu128-4090.csv") == "rtx4090"


def test_samples_are_deterministic_and_disjoint():
    rows = pa.read_table(TABLE)
    tune, held = pa.sample(rows, "tune"), pa.sample(rows, "heldout")
    assert len(tune) == len(held) == 100
    key = lambda r: (r["model"], r["img"])  # noqa: E731
    assert not {key(r) for r in tune} & {key(r) for r in held}
    assert [key(r) for r in tune] == [key(r) for r in pa.sample(list(reversed(rows)), "tune")]


def test_fresh_sample_is_the_next_hundred_and_the_same_models_everywhere():
    rows = pa.read_table(TABLE)
    parts = {w: [(r["model"], r["img"]) for r in pa.sample(rows, w)] for w in pa.PARTS}
    assert all(len(v) == 100 for v in parts.values())
    assert len(set(parts["tune"]) | set(parts["heldout"]) | set(parts["fresh"])) == 300
    # another table gives its rows of the same models, whatever rows it holds beside them
    other = pa.read_table(pa.TABLES / "timm-infer-amp-nchw-pt291-cu130-pro6000maxq.csv")
    fresh = pa.sample(other, "fresh")
    assert [r["model"] for r in fresh] == [m for m, _ in parts["fresh"]]
    # a model that table holds only at other sizes comes at the nearest one, marked
    moved = [r for r in fresh if "drawn_img" in r]
    assert [(r["model"], r["img"], r["drawn_img"]) for r in moved] == [("ese_vovnet57b", 256, 224)]
    # a table of only the first 200 models has no fresh rows (not the next ones of its own ordering)
    first = pa.sample(rows, "tune") + pa.sample(rows, "heldout")
    assert pa.sample(first, "fresh") == [] and pa.sample(first, "heldout") == pa.sample(rows, "heldout")


def test_worst_and_family_summary_name_the_models_and_families():
    def row(name, published, after, families):
        return {"model": name, "img": 224, "published": published, "after": after, "families": families}

    rows = [
        row("a", 400, 400, {"gemm": 9.0, "norm": 1.0}),
        row("b", 300, 300, {"gemm": 8.0, "conv": 2.0}),
        row("c", 200, 500, {"depthwise": 6.0, "conv": 4.0}),
        row("d", 100, 100, {"gemm": 1.0}),
    ]
    lines = pa.worst(rows, n=2)
    assert lines[0].split()[0] == "c" and "rank   3 →   1 (  -2)" in lines[0] and "depthwise 60%, conv 40%" in lines[0]
    summary = pa.by_family(rows)
    assert summary[0].split()[:2] == ["gemm", "3"] and "median est/pub  1.00" in summary[0]
    assert summary[1].split()[:2] == ["depthwise", "1"] and "median est/pub  2.50" in summary[1]


@pytest.mark.slow
def test_estimate_ranks_a_few_tuning_models(tmp_path, monkeypatch):
    """Eight tuning models from small to large: the autocast estimate orders them as the table
    does (ρ ≥ 0.9) and every one lies within 2× of the published throughput."""
    from estimate_accuracy import spearman

    monkeypatch.setenv("ARCHLINT_BENCH_CACHE", str(tmp_path))
    names = {
        "lcnet_075",
        "resnet18",
        "regnetx_040",
        "seresnet50",
        "deit_base_patch16_224",
        "convformer_s36",
        "vgg13",
        "efficientnetv2_l",
    }
    rows = [r for r in pa.sample(pa.read_table(TABLE), "tune") if r["model"] in names]
    out = pa.evaluate(rows, "rtx4090", per_model=False)
    assert len(out) == len(rows) >= 6
    assert spearman([r["after"] for r in out], [r["published"] for r in out]) >= 0.9
    assert all(0.5 <= r["after"] / r["published"] <= 2 for r in out)
