"""`archlint calibrate --families`: the share arithmetic, the families each case counts under, the
spec copy it writes, its errors, and the command itself on this CPU (tiny sizes, one repeat)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import torch

from archlint import devices
from archlint.cli import main
from archlint.model.estimating import calibration, families
from archlint.model.timing import roofline

ROOT = Path(__file__).resolve().parents[3]
CPU = torch.device("cpu")
PEAKS = {
    "device": "cpu|x|float32",
    "peak_flops_per_s": 1e12,
    "bandwidth_bytes_per_s": 1e11,
    "cache_bandwidth_bytes_per_s": 2e11,
    "cache_bytes": 2**24,
    "matmul_n": 1024,
    "copy_bytes": 2**27,
}


def _case(**kw):
    base = dict(
        name="c",
        op={"kind": "activation", "in_shapes": [[8]], "out_shapes": [[8]]},
        tensor=False,
        bound="memory",
        macs=0,
        nbytes=0,
        make=lambda: lambda: None,
    )
    return families.Case(**{**base, **kw})


def test_a_memory_share_is_bytes_per_second_over_the_bandwidth():
    roofs = families.Roofs(flops={}, bandwidth=1e9, basis="b")
    assert families.share(_case(nbytes=4_000_000), 8.0, roofs) == pytest.approx(0.5)  # 4 MB in 8 ms = 0.5 GB/s


def test_a_compute_share_divides_out_the_specs_tile_and_wave_efficiency():
    """One 128×128 tile on 2 SMs leaves one SM idle: the estimate multiplies by ½, so the share doubles."""
    m, k, n = 128, 32, 128
    op = {"kind": "linear", "in_shapes": [[m, k]], "out_shapes": [[m, n]], "param_shapes": {"weight": [n, k]}}
    case = _case(op=op, tensor=True, bound="compute", macs=m * k * n)
    roof = 2 * m * k * n / 1e-3  # the case runs at exactly the roof in 1 ms
    plain = families.Roofs(flops={"tensor": roof}, bandwidth=1.0, basis="measured")
    spec = families.Roofs(flops={"tensor": roof}, bandwidth=1.0, basis="spec", tile=(128, 128, 32), sms=2)
    assert families.share(case, 1.0, plain) == pytest.approx(1.0)
    assert families.efficiency(case, spec) == pytest.approx(0.5)
    assert families.share(case, 1.0, spec) == pytest.approx(2.0)
    assert families.share(_case(op=op, bound="compute", macs=1), 1.0, plain) is None  # no CUDA-core roof measured


def test_a_family_is_the_median_lowest_and_highest_case_capped_at_the_roof():
    assert families.summarize([0.3, 0.4]) == (pytest.approx(0.35), 0.3, 0.4, False)
    assert families.summarize([1.2, 0.2, 0.5]) == (0.5, 0.2, 1.0, True)


def test_each_case_counts_under_the_share_the_estimate_applies_to_its_op():
    by_name = {
        c.name.split(" (")[0].split(" 1×")[0]: c.family for c in families.family_cases(CPU, torch.float32, 1, False)
    }
    assert by_name["linear ViT-B MLP fc1"] == "tensor-gemm"
    assert by_name["sdpa ViT-B"] == "attention"
    assert by_name["relu"] == by_name["add"] == "stream"
    assert by_name["mul broadcast"] == by_name["batchnorm eval"] == "broadcast"
    assert by_name["conv depthwise 3×3 C144 @56 NCHW"] == by_name["maxpool 3×3/2"] == "window"
    assert by_name["conv grouped 3×3 g32 128→128 @56 NCHW"] == "window"  # 4 channels a group: off the tensor cores


def test_the_size_curve_runs_from_batch_1_to_the_given_batch():
    curve = families.curve_cases(CPU, torch.float32, 32)
    assert [shape[0] for shape, _ in curve["conv"]] == [1, 4, 16, 32]
    assert [shape for shape, _ in curve["gemm"]][0] == (197, 768, 3072)


def _fragments():
    return {
        "top": {"launch-overhead-us": 7.5},
        "tables": {
            "achieved": ["[achieved]  # new", "stream = [0.7, 0.6, 0.8]"],
            "host-op-us": ["[host-op-us]", "linear = 9.0"],
        },
        "sources": {"achieved": "measured now", "launch-overhead-us": "measured too", "host-op-us": "also"},
    }


def test_the_spec_copy_replaces_the_measured_figures_and_keeps_the_rest():
    text = (devices.DIR / "h200.toml").read_text(encoding="utf-8")
    known = set(devices.GPU_FIGURES) | set(devices.GPU_OPTIONAL)
    merged, left_out = calibration.merged_spec(text, _fragments(), known)
    spec = devices.parse(tomllib.loads(merged), "copy")
    assert spec.achieved == {"stream": (0.7, 0.6, 0.8)}  # the old table is gone, not merged into
    assert spec.overhead_s == pytest.approx(7.5e-6)
    assert spec.sources["achieved"] == "measured now" and spec.sources["launch-overhead-us"] == "measured too"
    assert spec.peaks == devices.load_file(devices.DIR / "h200.toml").peaks
    assert "[peak-tflops]  # dense (no structured sparsity)" in merged  # comments kept
    assert left_out == ["host-op-us"] and "host-op-us" not in merged  # the loader would reject it


def test_a_spec_without_achieved_gets_the_table_before_its_sources():
    text = (devices.DIR / "a100-sxm.toml").read_text(encoding="utf-8")
    merged, _ = calibration.merged_spec(text, _fragments(), set(devices.GPU_FIGURES) | set(devices.GPU_OPTIONAL))
    assert merged.index("[achieved]") < merged.index("[sources]")
    assert devices.parse(tomllib.loads(merged), "copy").achieved == {"stream": (0.7, 0.6, 0.8)}


def test_write_spec_keeps_an_existing_file_unless_forced(tmp_path, capsys):
    target = tmp_path / "mine.toml"
    target.write_text("keep me")
    assert main(["calibrate", "--families", "--device-spec", "h200", "--write-spec", str(target)]) == 2
    assert "the file exists; give another path or --force" in capsys.readouterr().err
    assert target.read_text() == "keep me"
    assert main(["calibrate", "--families", "--write-spec", str(tmp_path / "new.toml")]) == 2
    assert "--write-spec needs --device-spec NAME" in capsys.readouterr().err


def test_a_family_that_cannot_run_here_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(roofline, "measure_peaks", lambda d, t: dict(PEAKS))

    def make():
        raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'\nsecond line")

    broken = _case(
        name="linear x",
        op={"kind": "linear", "in_shapes": [[2, 2]], "out_shapes": [[2, 2]]},
        tensor=True,
        bound="compute",
        make=make,
    )
    monkeypatch.setattr(families, "family_cases", lambda *a, **k: [broken])
    assert main(["calibrate", "--families", "--batch", "1", "--repeat", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "archlint: error: calibrate --families: tensor-gemm case 'linear x' cannot run on cpu in float32: "
        "\"addmm_impl_cpu_\" not implemented for 'Half'"
    ]


def test_the_host_op_cost_is_the_median_run_per_op_after_a_warm_up(monkeypatch):
    """Clock reads: the warm-up run (1 s, dropped), then runs of 2, 3 and 9 ms over 100 ops each."""
    ends = iter([0, 1.0, 0, 0.002, 0, 0.003, 0, 0.009])
    monkeypatch.setattr(families.time, "perf_counter", lambda: next(ends))
    assert families.host_op_us(CPU, "linear", autocast=True, n=100, repeat=3) == pytest.approx(30.0)  # 3 ms / 100


def test_the_command_on_this_cpu_prints_spec_toml_and_writes_a_spec_copy(tmp_path):
    """The real command, tiny sizes: the output is TOML with every key, the copy loads as a spec."""
    target = tmp_path / "h200-here.toml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ARCHLINT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archlint",
            "calibrate",
            "--families",
            "--batch",
            "1",
            "--repeat",
            "1",
            "--device-spec",
            "h200",
            "--write-spec",
            str(target),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = tomllib.loads(proc.stdout)
    assert set(doc["achieved"]) == {
        "tensor-gemm",
        "attention",
        "stream",
        "broadcast",
        "window",
        "depthwise-wide",
    }  # no CUDA cores on a CPU
    for value, low, high in doc["achieved"].values():
        assert 0 < low <= value <= high <= 1
    assert set(doc["host-op-us"]) == {"elementwise", "elementwise-autocast", "linear", "linear-autocast"}
    assert doc["launch-overhead-us"] == doc["host-op-us"]["elementwise"] > 0
    assert [p[:5] for p in doc["size-share"]["conv"]] == [[1, 64, 64, 56, 3]]
    assert set(doc["sources"]) == {"achieved", "launch-overhead-us", "host-op-us", "size-share"}
    assert "the h200 spec's roofs" in doc["sources"]["achieved"] and "median of 1" in doc["sources"]["achieved"]
    written = devices.load_file(target)
    assert written.achieved == {k: tuple(v) for k, v in doc["achieved"].items()}
    assert written.overhead_s == pytest.approx(doc["launch-overhead-us"] * 1e-6)
    assert f"# written: {target}" in proc.stdout


def test_gpu_checks_families_section_is_the_command(monkeypatch):
    """benchmarks/gpu_checks.py's `families` section runs archlint.model.estimating.calibration, not a copy."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_checks

    seen = {}

    def fake_measure(device, dtype, batch, repeat, spec):
        seen.update(device=device.type, dtype=dtype, batch=batch, spec=spec.name)
        return {"rows": [], "curve": {}, "host": {"elementwise": 1.0}}

    monkeypatch.setattr(gpu_checks, "DEV", "cpu")
    monkeypatch.setattr(calibration, "measure", fake_measure)
    monkeypatch.setattr(calibration, "to_toml", lambda result: "[achieved]\n")
    monkeypatch.setattr(gpu_checks, "_free", lambda: None)
    results: dict = {}
    gpu_checks.section_families(results, gpu_checks.Budget(60), {})
    assert seen == {"device": "cpu", "dtype": torch.float16, "batch": gpu_checks.LATENCY_BATCH, "spec": "h200"}
    assert results["families"]["toml"] == "[achieved]\n" and results["families"]["host_op_us"] == {"elementwise": 1.0}


def test_keys_the_loader_learns_are_written_too():
    """Once the spec loader knows host-op-us, the copy carries its table and source as well."""
    text = (devices.DIR / "h200.toml").read_text(encoding="utf-8")
    merged, left_out = calibration.merged_spec(text, _fragments(), {"achieved", "launch-overhead-us", "host-op-us"})
    doc = tomllib.loads(merged)
    assert left_out == [] and doc["host-op-us"] == {"linear": 9.0} and doc["sources"]["host-op-us"] == "also"
    assert merged.index("[host-op-us]") < merged.index("[sources]")


def test_a_families_option_without_families_is_an_error(capsys):
    assert main(["calibrate", "--device-spec", "h200"]) == 2
    assert "--device-spec applies to `archlint calibrate --families`; add --families" in capsys.readouterr().err


def test_a_busy_cpu_is_said_in_a_toml_comment(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(calibration, "measure", lambda *a: "result")
    monkeypatch.setattr(calibration, "to_toml", lambda result: "[achieved]\n")
    monkeypatch.setattr(calibration, "load_average", lambda: 64.0)
    assert main(["calibrate", "--families"]) == 0
    out = capsys.readouterr().out
    assert "# warning: the machine was busy (load average 64.0)" in out
    assert tomllib.loads(out) == {"achieved": {}}


def test_write_spec_never_replaces_the_spec_it_copies(tmp_path):
    """Issue 38: `--device-spec mine.toml --write-spec mine.toml --force` replaced the spec being
    copied; the copy goes through the one writer, which refuses an input of the run."""
    from archlint import devices
    from archlint.errors import UsageError
    from archlint.model.estimating import calibration

    mine = tmp_path / "mine.toml"
    mine.write_bytes(Path(devices.resolve("h200").path).read_bytes())
    before = mine.read_bytes()
    spec = devices.resolve(str(mine))
    with pytest.raises(UsageError, match="it is the device spec that this run reads"):
        calibration.write_spec(spec, {"top": {}, "tables": {}, "sources": {}}, mine, force=True)
    assert mine.read_bytes() == before
    calibration.write_spec(spec, {"top": {}, "tables": {}, "sources": {}}, tmp_path / "copy.toml", force=False)
    assert devices.resolve(str(tmp_path / "copy.toml")).name == spec.name
