"""The published-table benchmark (benchmarks/published_accuracy.py): its tables, its sample, and on
a few models the estimate against timm's published RTX 4090 throughput."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("timm")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import published_accuracy as pa  # noqa: E402

TABLE = pa.TABLES / "timm-infer-amp-nchw-pt240-cu124-rtx4090.csv"


def test_tables_parse_and_name_their_device():
    tables = sorted(pa.TABLES.glob("*.csv"))
    assert len(tables) >= 3
    for t in tables:
        rows = pa.read_table(t)
        assert rows and all(r["published"] > 0 and r["batch"] > 0 and r["img"] > 0 for r in rows)
        assert pa.device_of(t) in ("rtx3090", "rtx4090", "rtx5090")


def test_samples_are_deterministic_and_disjoint():
    rows = pa.read_table(TABLE)
    tune, held = pa.sample(rows, "tune"), pa.sample(rows, "heldout")
    assert len(tune) == len(held) == 100
    key = lambda r: (r["model"], r["img"])  # noqa: E731
    assert not {key(r) for r in tune} & {key(r) for r in held}
    assert [key(r) for r in tune] == [key(r) for r in pa.sample(list(reversed(rows)), "tune")]


@pytest.mark.slow
def test_estimate_ranks_a_few_tuning_models(tmp_path, monkeypatch):
    """Eight tuning models from small to large: the autocast estimate orders them as the table
    does (ρ ≥ 0.9) and every one lies within 2× of the published throughput."""
    from estimate_accuracy import spearman

    monkeypatch.setenv("ARCHLINT_BENCH_CACHE", str(tmp_path))
    names = {"lcnet_075", "resnet18", "regnetx_040", "seresnet50", "deit_base_patch16_224", "convformer_s36",
             "vgg13", "efficientnetv2_l"}
    rows = [r for r in pa.sample(pa.read_table(TABLE), "tune") if r["model"] in names]
    out = pa.evaluate(rows, "rtx4090", per_model=False)
    assert len(out) == len(rows) >= 6
    assert spearman([r["after"] for r in out], [r["published"] for r in out]) >= 0.9
    assert all(0.5 <= r["after"] / r["published"] <= 2 for r in out)
