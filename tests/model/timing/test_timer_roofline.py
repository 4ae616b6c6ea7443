"""The timer's statistics and interleaving, roofline math, the peaks cache and `archlint calibrate`."""

from __future__ import annotations

import json

import pytest
import torch

from archlint.cli import main
from archlint.model.timing import roofline
from archlint.model.timing.timer import CpuTimer, Stats, make_timer, sample

from .graphs import DEVICES


def test_stats_are_median_and_quartiles():
    s = Stats.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.q1, s.q3, s.n) == (3.0, 2.0, 4.0, 5)
    assert s.spread == [2.0, 4.0]
    assert Stats.of([7.0]).spread == [7.0, 7.0]


def test_cpu_regions_accumulate_within_a_repeat_and_reset_after():
    timer = CpuTimer()
    with timer.region("a"):
        sum(range(1000))
    with timer.region("a"):  # a module called twice counts twice
        sum(range(1000))
    with timer.region("b"):
        pass
    first = timer.collect()
    assert set(first) == {"a", "b"} and first["a"] > first["b"] >= 0
    assert timer.collect() == {}


@pytest.mark.parametrize("device", DEVICES)
def test_sample_interleaves_runs_and_keeps_warmup_untimed(device):
    timer = make_timer(device)
    order: list[str] = []
    x = torch.ones(64, device=device)

    def run(name):
        def go():
            order.append(name)
            with timer.region(name):
                x.mul_(1.0)

        return go

    a, b = sample([run("a"), run("b")], timer, warmup=2, repeat=3)
    assert order == ["a", "b"] * 5
    assert a.regions["a"].n == 3 and b.regions["b"].n == 3 and "b" not in a.regions
    assert a.regions["a"].median > 0
    assert a.per_pass.n == 3 and a.per_pass.median == a.regions["a"].median  # one region per pass


def test_per_pass_total_is_a_median_of_sums():
    timer = CpuTimer()
    durations = iter([(1.0, 1.0), (1.0, 9.0), (9.0, 1.0)])  # rare, large noise in either op

    def run():
        x, y = next(durations)
        timer._spans += [("x", 0, int(x * 1e6)), ("y", 0, int(y * 1e6))]

    (s,) = sample([run], timer, warmup=0, repeat=3)
    assert s.regions["x"].median + s.regions["y"].median == 2.0  # the sum of the medians
    assert s.per_pass.median == 10.0  # the median of the per-pass sums 2, 10, 10


PEAKS = {"peak_flops_per_s": 1e12, "bandwidth_bytes_per_s": 1e11}  # ridge: 10 FLOP/byte


def test_place_on_the_roofline():
    # 2·FLOPs/MAC = 2·1e9/1e8 = 20 ≥ 10 → compute bound; attainable 2e9/1e12 s = 2 ms
    r = roofline.place(flops=10**9, mac_bytes=10**8, latency_ms=4.0, p=PEAKS)
    assert r == {
        "intensity": 20.0,
        "bound": "compute",
        "memory_roof": "dram",
        "attainable_ms": pytest.approx(2.0),
        "efficiency": pytest.approx(0.5),
    }
    # an element-wise op: no FLOPs, 1e8 bytes at 1e11 B/s = 1 ms
    r = roofline.place(flops=0, mac_bytes=10**8, latency_ms=2.0, p=PEAKS)
    assert r["bound"] == "memory" and r["attainable_ms"] == pytest.approx(1.0) and r["efficiency"] == pytest.approx(0.5)
    assert roofline.place(flops=0, mac_bytes=0, latency_ms=1.0, p=PEAKS) is None  # a view


def test_cache_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("ARCHLINT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert roofline.cache_dir() == tmp_path / "xdg" / "archlint"
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path / "mine"))
    assert roofline.cache_dir() == tmp_path / "mine"


def test_peaks_are_measured_once_then_read_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path))
    calls = []
    full = dict(PEAKS, device="x", cache_bandwidth_bytes_per_s=4e11, cache_bytes=2**24)
    monkeypatch.setattr(roofline, "measure_peaks", lambda d, t: calls.append(1) or dict(full))
    cpu = torch.device("cpu")
    assert roofline.peaks(cpu, torch.float32) == (full, False)
    assert roofline.peaks(cpu, torch.float32) == (full, True)
    assert len(calls) == 1
    roofline.peaks(cpu, torch.float16)  # another dtype: its own entry
    assert len(calls) == 2
    data = json.loads((tmp_path / "roofline.json").read_text())
    assert set(data) == {roofline.device_key(cpu, torch.float32), roofline.device_key(cpu, torch.float16)}


def test_a_corrupt_cache_is_measured_again(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path))
    (tmp_path / "roofline.json").write_text("{not json")
    monkeypatch.setattr(roofline, "measure_peaks", lambda d, t: dict(PEAKS))
    assert roofline.peaks(torch.device("cpu"), torch.float32) == (PEAKS, False)
    assert json.loads((tmp_path / "roofline.json").read_text())


def test_measured_peaks_are_positive():
    p = roofline.measure_peaks(torch.device("cpu"), torch.float32)
    assert p["peak_flops_per_s"] > 0 and p["bandwidth_bytes_per_s"] > 0
    assert p["copy_bytes"] == 2 * 64 * 2**20


def test_peak_matmul_is_the_best_size_until_one_run_is_long_enough(monkeypatch):
    """Sizes double until one run takes ≥ 50 ms; the fastest size gives the peak, not the last one."""
    timings = iter([1.0, 5.0, 60.0, 10.0, 0.1])  # ms: 512², 1024² (the best), 2048² (≥ 50 ms: stop), copies
    monkeypatch.setattr(roofline, "_best_ms", lambda fn, device, runs: next(timings))
    monkeypatch.setattr(roofline, "last_level_cache_bytes", lambda device: 32 * 2**20)
    p = roofline.measure_peaks(torch.device("cpu"), torch.float32)
    assert p["cache_bytes"] == 16 * 2**20  # a quarter of the cache copied into another quarter
    assert p["cache_bandwidth_bytes_per_s"] == pytest.approx(2 * 8 * 2**20 / 0.1e-3)
    assert p["matmul_n"] == 1024
    assert p["peak_flops_per_s"] == pytest.approx(2 * 1024**3 / 5e-3)
    assert p["bandwidth_bytes_per_s"] == pytest.approx(2 * 64 * 2**20 / 10e-3)


def test_calibrate_command_measures_again_and_caches(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        roofline, "measure_peaks", lambda d, t: dict(PEAKS, device="cpu|x", matmul_n=512, copy_bytes=2**27)
    )
    assert main(["calibrate"]) == 0
    out = capsys.readouterr().out
    assert "1,000.0 GFLOP/s" in out and "100.0 GB/s" in out and "ridge point             10.0" in out
    assert (tmp_path / "roofline.json").is_file()


def test_calibrate_warns_when_the_machine_is_busy(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        roofline, "measure_peaks", lambda d, t: dict(PEAKS, device="cpu|x", matmul_n=512, copy_bytes=2**27)
    )
    monkeypatch.setattr(roofline.os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    assert main(["calibrate"]) == 0
    assert "warning: the machine was busy (load average 64.0)" in capsys.readouterr().out


def test_calibrate_cuda_without_cuda_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["calibrate", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"archlint: error: --device cuda: CUDA is not available on this machine (torch {torch.__version__}); use --device cpu"
    ]


def test_calibrate_rejects_an_unknown_dtype(capsys):
    assert main(["calibrate", "--dtype", "int3"]) == 2
    assert "dtype 'int3' is not supported" in capsys.readouterr().err
