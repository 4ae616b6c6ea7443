"""The text report's "where the time goes" section."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from archlint.report.time_table import print_time, shares
from archlint.result import Layer, ModelResult, Totals


def _model(latencies: dict[str, tuple[str, float]]) -> ModelResult:
    layers = [
        Layer(
            name=name,
            kind=kind,
            op="x",
            module=None,
            latency_ms=ms,
            latency_spread_ms=None if ms is None else [ms * 0.9, ms * 1.1],
            roofline=None
            if ms is None
            else {"bound": "memory", "efficiency": 0.25, "intensity": 1.0, "attainable_ms": ms / 4},
        )
        for name, (kind, ms) in latencies.items()
    ]
    return ModelResult(
        target="m.py:Net",
        strategy="fx",
        device="cpu",
        dtype="float32",
        input_shapes=[[1, 3, 8, 8]],
        totals=Totals(latency_ms=9.0, latency_ms_sum_of_ops=10.0),
        layers=layers,
        roofline={"peak_flops_per_s": 2e11, "bandwidth_bytes_per_s": 2e10},
        timing="per op: fx graph replayed node by node",
    )


MODEL = {
    "conv1": ("conv", 5.0),
    "fc": ("linear", 1.0),
    "relu": ("activation", 1.5),
    "bn": ("norm", 0.5),
    "cat": ("concat", 1.0),
    "view": ("reshape", 0.5),
    "pool": ("pool", 0.5),
    "const": ("creation", None),
}


def test_shares_of_op_time_by_family():
    s = shares(_model(MODEL).layers)
    assert s == {
        "compute": pytest.approx(0.6),
        "element-wise": pytest.approx(0.2),
        "memory-only": pytest.approx(0.15),
        "other": pytest.approx(0.05),
    }
    assert shares(_model({"a": ("conv", None)}).layers) == {}


def _render(model, top=3) -> str:
    buf = io.StringIO()
    print_time(model, Console(file=buf, width=120, highlight=False), top=top)
    return buf.getvalue()


def test_print_time_shows_totals_shares_and_slowest_ops():
    out = _render(_model(MODEL))
    assert "9.000 ms end to end, 10.000 ms summed over ops (111.1% of end to end)" in out
    assert "compute 60.0%, element-wise 20.0%, memory-only 15.0%, other 5.0%" in out
    assert "slowest 3 of 7 timed ops" in out
    assert "ridge 10.0 FLOP/byte" in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["conv1", "relu", "fc"]  # the top 3, slowest first
    assert "50.0%" in rows[0] and "memory" in rows[0] and "25.0%" in rows[0]


def test_print_time_prints_nothing_without_latency():
    assert _render(_model({"a": ("conv", None)})) == ""
