"""TraceAnalysis's per-rule figures are typed records (archlint/trace/records.py); the two in the
JSON, traces[].memory and traces[].evidence, are written with the keys and order they had as
dicts (docs/design.md's contract), and `{}` for a trace that recorded none (issue 40.1)."""

from __future__ import annotations

import json

from archlint.config import Settings
from archlint.trace.command import lint_trace
from archlint.trace.records import Collective, DataParallel, PageableCopies, TraceEvidence, TraceMemory
from tests.trace.scenarios import SCENARIOS

EVIDENCE_KEYS = [
    "compiled",
    "triton_share",
    "compiled_host_ranges",
    "graph_launches",
    "layout_share",
    "collectives",
    "with_stack",
    "loader_workers",
    "sync_idle_by_call",
    "item_calls",
]


def _analysis(trace, tmp_path):
    analysis, _ = lint_trace(trace.write(tmp_path / "t.json"), Settings())
    return analysis, json.loads(json.dumps(analysis.to_dict()))


def test_memory_and_evidence_are_written_in_the_contracts_order(tmp_path):
    analysis, written = _analysis(SCENARIOS["AL508"](True), tmp_path)  # memory events, capacity from the device
    assert isinstance(analysis.memory, TraceMemory) and isinstance(analysis.evidence, TraceEvidence)
    assert list(written["memory"]) == ["device", "peak_allocated", "peak_reserved", "capacity", "peak_share"]
    assert written["memory"]["peak_share"] == round(
        written["memory"]["peak_reserved"] / written["memory"]["capacity"], 4
    )
    assert list(written["evidence"]) == EVIDENCE_KEYS
    assert isinstance(analysis.pageable_h2d, PageableCopies) and isinstance(analysis.data_parallel, DataParallel)


def test_collectives_are_written_as_objects_and_no_memory_events_write_an_empty_object(tmp_path):
    analysis, written = _analysis(SCENARIOS["AL507"](True), tmp_path)  # no memory events
    assert analysis.memory is None and written["memory"] == {}
    evidence = TraceEvidence(False, 0.0, 0, 0, 0.0, [Collective("nccl:all_reduce", 2.0, None)], False, False)
    assert evidence.to_dict()["collectives"] == [
        {"name": "nccl:all_reduce", "calls_per_step": 2.0, "median_bytes": None}
    ]
