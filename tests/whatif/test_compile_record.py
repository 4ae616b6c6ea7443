"""--what-if's estimate of compiling from the model's last compile here (issue 45): a second run
on the same model finds inductor's on-disk cache full and compiles 12-15× faster, which the
formula's estimate (3-7× the time taken then) did not know."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from archlint.config import Settings
from archlint.model.analyze import analyze_model
from archlint.model.speedups import compile_record
from archlint.model.speedups.compile_record import (
    WARM_FIXED_S,
    WARM_SHARE,
    Recorded,
    expected,
    graph_key,
    recorded,
    remember,
)
from archlint.model.speedups.run import compile_seconds, expected_seconds


def _graph(model: nn.Module, *shape: int):
    graph, _ = analyze_model(model, (torch.randn(*shape),), Settings())
    return graph


@pytest.fixture
def places(tmp_path, monkeypatch):
    """archlint's cache and inductor's, both fresh and under tmp_path."""
    inductor = tmp_path / "inductor"
    inductor.mkdir()
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path / "archlint"))
    monkeypatch.setattr(compile_record, "inductor_folder", lambda: inductor)
    return inductor


def test_the_key_is_the_graph_torch_compiles():
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    a, b = graph_key(_graph(net, 1, 3, 16, 16)), graph_key(_graph(net, 1, 3, 16, 16))
    assert a == b and len(a) == 64
    assert graph_key(_graph(net, 2, 3, 16, 16)) != a  # another input: another compile
    other = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    assert graph_key(_graph(other, 1, 3, 16, 16)) != a  # another forward
    # another device: inductor builds other code (a CPU compile's cached files say nothing of a GPU's)
    assert graph_key(_graph(net, 1, 3, 16, 16), "cuda") != graph_key(_graph(net, 1, 3, 16, 16), "cpu")


def test_no_record_keeps_the_formula(places):
    assert recorded("k") is None
    assert expected(None, 12.0, 1.0) == (12.0, "")


def test_a_cold_compile_recorded_makes_the_next_warm_while_its_files_are_there(places):
    made = places / "fxgraph" / "ab" / "entry"
    made.parent.mkdir(parents=True)
    made.write_text("x")
    assert remember("k", 20.0, {"fxgraph/ab/entry"}, 1.0) is None
    rec = recorded("k")
    assert rec == Recorded(20.0, 1.0, str(places), ("fxgraph/ab/entry",))
    seconds, basis = expected(rec, 99.0, 1.0)
    assert seconds == pytest.approx(max(WARM_SHARE * 20.0, WARM_FIXED_S)) and "cache still holds it" in basis
    # a short cold compile: a warm one is not estimated below its own fixed part (TinyNet took 3 s
    # warm after a 6 s cold compile, against 0.6 s from the share alone)
    remember("short", 6.0, {"fxgraph/ab/entry"}, 1.0)
    assert expected(recorded("short"), 99.0, 1.0)[0] == pytest.approx(WARM_FIXED_S)
    # the warm compile that followed (no file added): its own time from then on
    assert remember("k", 1.5, set(), 0.5) is None  # at a load below one core's: taken as 1
    seconds, basis = expected(recorded("k"), 99.0, 2.0)
    assert seconds == pytest.approx(1.5 * 2**0.75) and "from inductor's cache" in basis
    assert recorded("k").load == 1.0  # the cold compile's load kept beside the warm one's
    # the cache emptied (a reboot cleared /tmp): cold again, the recorded time at this load
    made.unlink()
    seconds, basis = expected(recorded("k"), 99.0, 2.0)
    assert seconds == pytest.approx(20.0 * 2**0.75) and "last cold compile" in basis


def test_the_record_is_one_file_and_a_corrupt_one_is_no_record(places, tmp_path):
    remember("k", 20.0, {"a"}, 1.0)
    path = tmp_path / "archlint" / compile_record.RECORD_FILE
    assert set(json.loads(path.read_text())) == {"k"}
    path.write_text("{not json")
    assert recorded("k") is None
    path.write_text(json.dumps({"k": {"cold_s": "slow"}}))
    assert recorded("k") is None


def test_the_estimate_takes_the_recorded_compile_in_place_of_the_formula():
    formula = expected_seconds(0.01, ["compile"], 10, True, 300)
    recorded_warm = expected_seconds(0.01, ["compile"], 10, True, 300, compile_s=2.0)
    assert formula - recorded_warm == pytest.approx(compile_seconds(300) - 2.0)


def test_a_record_written_by_another_run_meanwhile_is_no_crash(places, monkeypatch):
    """remember reads the record once: another run that writes it between two readings (here the
    second reading finds the model's entry, the first did not) made `data[key]` a KeyError."""
    entry = {"cold_s": 20.0, "load": 1.0, "folder": str(places), "files": ["a"]}
    readings = iter([{}, {"k": entry}])
    monkeypatch.setattr(compile_record, "_read", lambda: next(readings, {"k": entry}))
    assert remember("k", 1.5, set(), 1.0) is None  # no file added: a warm compile, were the entry seen


def test_a_compile_answered_from_a_cache_filled_before_any_record_is_not_recorded(places):
    """Its time is a warm one, and the files it reads are not known: recorded as 'cold', it would
    have been the estimate of a later cold compile (the review's finding)."""
    assert remember("fresh", 1.2, set(), 1.0) is None
    assert recorded("fresh") is None
