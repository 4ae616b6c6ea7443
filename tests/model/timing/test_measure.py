"""measure(): every op timed, the model left as it was, out-of-memory and missing CUDA reported
clearly, the hook fallback, the trace file, and the what-if Pricer."""

from __future__ import annotations

import json
import math

import networkx as nx
import pytest
import torch
from torch import nn

from archlint.errors import UsageError
from archlint.model.opgraph import display_names, ops
from archlint.model.timing import roofline
from archlint.model.timing.measure import LatencyReport, _noise_notes, _stale_peak_note, measure

from .graphs import DEVICES, fx_opgraph


def _layers(graph):
    return dict(ops(graph))


@pytest.mark.parametrize("device", DEVICES)
def test_every_op_gets_a_positive_finite_latency(small, settings, device):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    report = measure(graph, model, inputs, device, settings)
    layers = _layers(graph)
    assert len(layers) == 8
    for name, d in layers.items():
        ms = d["latency_ms"]
        assert math.isfinite(ms) and ms > 0, name
        q1, q3 = d["latency_spread_ms"]
        assert 0 < q1 <= ms <= q3, name
    assert math.isfinite(report.end_to_end_ms) and report.end_to_end_ms > 0
    assert report.sum_of_ops_ms == pytest.approx(sum(d["latency_ms"] for d in layers.values()))
    assert (
        "replayed node by node as generated code" in report.method and f"median of {settings.repeat}" in report.method
    )
    assert report.pricer.end_to_end_ms == report.end_to_end_ms


@pytest.mark.parametrize("device", DEVICES)
def test_roofline_placement_per_op(small, settings, device):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    report = measure(graph, model, inputs, device, settings)
    p = report.peaks
    assert p["peak_flops_per_s"] > 0 and p["bandwidth_bytes_per_s"] > 0
    for name, d in _layers(graph).items():
        r = d["roofline"]
        if d["mac_bytes"] == 0:  # a view moves nothing: not on the roofline
            assert r is None, name
            continue
        # an op whose bytes fit in the last-level cache is judged against the cache's bandwidth
        in_cache = d["mac_bytes"] <= p["cache_bytes"]
        assert r["memory_roof"] == ("cache" if in_cache else "dram"), name
        bandwidth = p["cache_bandwidth_bytes_per_s"] if in_cache else p["bandwidth_bytes_per_s"]
        ridge = p["peak_flops_per_s"] / bandwidth
        assert r["intensity"] == pytest.approx(2 * d["flops"] / d["mac_bytes"])
        assert r["bound"] == ("compute" if r["intensity"] >= ridge else "memory")
        expected = max(2 * d["flops"] / p["peak_flops_per_s"], d["mac_bytes"] / bandwidth) * 1e3
        assert r["attainable_ms"] == pytest.approx(expected)
        assert r["efficiency"] == pytest.approx(expected / d["latency_ms"])


def test_model_keeps_its_device_mode_and_parameters(small, settings):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    model.train()
    model.bn.eval()  # a frozen BatchNorm inside a training model keeps its own flag
    before = {k: v.clone() for k, v in model.state_dict().items()}
    measure(graph, model, inputs, "cpu", settings)
    assert model.training and model.conv.training  # timed in eval mode, handed back in train mode
    assert not model.bn.training
    for k, v in model.state_dict().items():  # eval mode: BatchNorm statistics untouched
        assert torch.equal(v, before[k]), k


def _raise_oom(exc):
    def forward(*args, **kwargs):
        raise exc

    return forward


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 34359738368 bytes."
        ),
        MemoryError(),
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    ],
    ids=["cpu-allocator", "MemoryError", "OutOfMemoryError"],
)
def test_out_of_memory_is_a_usage_error_suggesting_a_smaller_batch(small, settings, monkeypatch, exc):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    model.train()
    monkeypatch.setattr(model.conv2, "forward", _raise_oom(exc))
    with pytest.raises(UsageError, match="ran out of CPU memory.*smaller batch"):
        measure(graph, model, inputs, "cpu", settings)
    assert model.training
    assert all(p.device.type == "cpu" for p in model.parameters())


@pytest.mark.cuda
def test_out_of_memory_on_cuda_moves_the_model_back(small, settings, monkeypatch):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    monkeypatch.setattr(model.conv2, "forward", _raise_oom(torch.OutOfMemoryError("CUDA out of memory.")))
    with pytest.raises(UsageError, match="ran out of GPU memory.*smaller batch"):
        measure(graph, model, inputs, "cuda", settings)
    assert all(t.device.type == "cpu" for t in (*model.parameters(), *model.buffers()))


@pytest.mark.cuda
def test_cuda_timing_moves_the_model_back(small, settings):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    measure(graph, model, inputs, "cuda", settings)
    assert all(t.device.type == "cpu" for t in (*model.parameters(), *model.buffers()))
    assert all(t.device.type == "cpu" for t in graph.graph["replay"].graph_module.parameters())


def test_other_errors_are_not_disguised_as_out_of_memory(small, settings, monkeypatch):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    monkeypatch.setattr(model.conv2, "forward", _raise_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied")))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        measure(graph, model, inputs, "cpu", settings)


def test_cuda_without_cuda_is_a_usage_error(small, settings, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model, inputs = small
    with pytest.raises(UsageError, match="CUDA is not available on this machine.*--device cpu"):
        measure(fx_opgraph(model, inputs), model, inputs, "cuda", settings)


@pytest.mark.parametrize("name", ["tpu", "cuda:x", "mps"])
def test_unknown_devices_are_usage_errors(name):
    with pytest.raises(UsageError, match="device"):
        roofline.resolve_device(name)


def test_dispatch_graphs_are_timed_per_module_with_hooks(small, settings):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    graph.graph["replay"] = None  # what the dispatch-recording capture hands over
    graph.graph["strategy"] = "dispatch"
    report = measure(graph, model, inputs, "cpu", settings)
    assert "forward hooks" in report.method
    assert any("cannot be replayed op by op" in n for n in report.notes)
    assert set(report.module_latency_ms) == {"conv", "bn", "conv2", "pool", "fc"}
    assert all(ms > 0 for ms in report.module_latency_ms.values())
    layers = _layers(graph)
    for name in ("conv", "bn", "conv2", "pool", "fc"):  # alone in their module: the module's time
        assert layers[name]["latency_ms"] == report.module_latency_ms[name]
    for name in ("relu", "add", "flatten"):  # functional ops at the root: no module to time
        assert layers[name].get("latency_ms") is None
    assert report.sum_of_ops_ms == pytest.approx(sum(report.module_latency_ms.values()))
    assert not any(h for m in model.modules() for h in (m._forward_hooks, m._forward_pre_hooks))


@pytest.mark.parametrize("device", DEVICES)
def test_trace_has_one_named_range_per_timed_op(small, settings, tmp_path, device):
    model, inputs = small
    graph = fx_opgraph(model, inputs)
    settings.trace_dir = tmp_path / "trace"
    report = measure(graph, model, inputs, device, settings)
    files = list(settings.trace_dir.glob("*.pt.trace.json"))
    assert files == [report.trace_file]
    trace = json.loads(files[0].read_text())
    ranges = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert sorted(ranges) == sorted(display_names(graph).values())  # the names every report shows
    assert any("trace of one per-op pass" in n for n in report.notes)


def test_trace_into_a_file_is_a_usage_error(small, settings, tmp_path):
    model, inputs = small
    settings.trace_dir = tmp_path / "taken"
    settings.trace_dir.write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        measure(fx_opgraph(model, inputs), model, inputs, "cpu", settings)


@pytest.mark.parametrize("device", DEVICES)
def test_pricer_times_a_copy_on_its_device_and_dtype(small, settings, device):
    model, inputs = small
    report = measure(fx_opgraph(model, inputs), model, inputs, device, settings)
    pricer = report.pricer
    assert pricer.device.type == device and pricer.dtype == torch.float32
    conv = nn.Conv2d(8, 8, 3).double()
    x = torch.randn(1, 8, 12, 12, dtype=torch.float64)
    small_ms, large_ms = pricer.time_modules((conv, (x,)), (nn.Conv2d(8, 64, 3).double(), (x,)))
    assert math.isfinite(small_ms) and 0 < small_ms
    assert math.isfinite(large_ms) and 0 < large_ms
    assert conv.weight.dtype == torch.float64 and conv.weight.device.type == "cpu"  # untouched


def _report(e2e, spread, summed, per_pass):
    return LatencyReport(
        end_to_end_ms=e2e,
        end_to_end_spread_ms=spread,
        sum_of_ops_ms=summed,
        per_pass_sum_of_ops_ms=per_pass,
        method="",
        peaks=None,
        notes=[],
        pricer=None,
    )


def test_quiet_timings_get_no_noise_note():
    assert _noise_notes(_report(10.0, [9.8, 10.3], 9.9, 10.0), torch.device("cpu"), load=0.5, cores=2) == []


def test_a_busy_cpu_is_noted():
    (note,) = _noise_notes(_report(10.0, [9.8, 10.3], 9.9, 10.0), torch.device("cpu"), load=3.5, cores=2)
    assert "busy" in note and "3.5 on 2 cores" in note


def test_widely_spread_end_to_end_passes_are_noted():
    (note,) = _noise_notes(_report(10.0, [9.0, 12.0], 10.0, 10.0), torch.device("cpu"), load=None, cores=2)
    assert "9.000–12.000 ms" in note and "30% of the median" in note and "--repeat" in note
    assert _noise_notes(_report(10.0, [9.0, 10.8], 10.0, 10.0), torch.device("cpu"), load=None, cores=2) == []


def test_per_op_medians_short_of_the_passes_are_noted():
    (note,) = _noise_notes(_report(10.0, [9.8, 10.3], 8.0, 10.0), torch.device("cpu"), load=None, cores=2)
    assert "sum to 8.000 ms" in note and "took 10.000 ms" in note


def _placed(bound, efficiency):
    graph = nx.DiGraph()
    graph.add_node("x", kind="input")
    graph.add_node("op", kind="conv", roofline={"bound": bound, "efficiency": efficiency})
    graph.add_edge("x", "op")
    return graph


def test_compute_bound_ops_beating_the_peak_point_at_stale_peaks():
    peaks = {"measured_at": "2026-01-01T00:00:00Z"}
    (note,) = _stale_peak_note(_placed("compute", 1.3), peaks, cached=True)
    assert "130%" in note and "cached at 2026-01-01T00:00:00Z" in note and "archlint calibrate" in note
    assert _stale_peak_note(_placed("compute", 1.05), peaks, cached=True) == []  # within timing noise
    assert _stale_peak_note(_placed("memory", 3.0), peaks, cached=True) == []  # in cache, not in DRAM


def test_measure_says_when_the_cached_peaks_are_too_low(small, settings, monkeypatch):
    low = {"peak_flops_per_s": 1.0, "bandwidth_bytes_per_s": 1.0, "measured_at": "then"}
    monkeypatch.setattr(roofline, "peaks", lambda dev, dtype: (low, True))
    model, inputs = small
    report = measure(fx_opgraph(model, inputs), model, inputs, "cpu", settings)
    assert any("ran faster than the roofline's peak allows" in n for n in report.notes)
