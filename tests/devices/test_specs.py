"""Device specs: every built-in validates and cites its sources; a bad file is exit 2 naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from archlint.cli import main
from archlint.devices import DIR, builtin_names, load_file

ROOT = Path(__file__).resolve().parents[2]
NETS = str(ROOT / "examples" / "nets.py")
REQUIRED = {
    "rtx3090",
    "rtx4090",
    "rtx5090",
    "a100-sxm",
    "a100-pcie",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "l4",
    "l40s",
    "t4",
    "cpu-example",
}


def test_builtins_validate_and_cite_every_figure():
    assert REQUIRED <= set(builtin_names())
    for name in builtin_names():
        spec = load_file(DIR / f"{name}.toml")
        assert spec.name == name
        assert spec.sources and all(text.strip() for text in spec.sources.values())
        assert spec.bandwidth > 0 and spec.sms > 0


def test_rtx_pro_6000_maxq_resolves_by_name_with_workstation_tensor_rates():
    """The RTX PRO 6000 Blackwell Max-Q: a built-in by name, with the same GB202 memory system as
    the RTX 5090 but 188 SMs and a 128 MB L2; an RTX PRO card runs fp16 with FP32 accumulate at
    the full tensor rate, where GeForce halves it, so its dense fp16 peak is over twice the 5090's
    (at its lower 300 W clocks)."""
    from archlint.devices import resolve

    spec, geforce = resolve("rtx-pro-6000-maxq"), resolve("rtx5090")
    assert spec.name == "rtx-pro-6000-maxq" and spec.kind == "gpu" and spec.memory_bytes == 96 * 2**30
    assert spec.sms == 188 and spec.cache_bytes == 128 * 2**20 and spec.bandwidth == geforce.bandwidth == 1792e9
    assert spec.peaks["tensor-fp16"] == 438.9e12 > 2 * geforce.peaks["tensor-fp16"]
    assert spec.peaks["cuda-fp32"] == 110e12
    assert "3,511 AI TOPS" in spec.sources["peak-tflops"]


def test_device_specs_lists_them(capsys):
    assert main(["device-specs"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED:
        assert f"{name}  (" in out
    assert "Ada GPU Architecture whitepaper" in out  # sources are printed


GOOD = (DIR / "rtx4090.toml").read_text()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            lambda t: t.replace('kind = "gpu"', 'kind = "gpu"\nboost-clock-ghz = 2.5'),
            "'boost-clock-ghz'",
        ),  # unknown key
        (lambda t: t + "\nboost-clock-ghz = 'whitepaper'\n", "'sources.boost-clock-ghz'"),  # a source of nothing
        (lambda t: t.replace("sm-count = 128\n", ""), "'sm-count'"),  # missing figure
        (lambda t: t.replace("memory-bandwidth-gbs = 1008", "memory-bandwidth-gbs = -1008"), "'memory-bandwidth-gbs'"),
        (lambda t: t.replace("tensor-fp16 = 165.2", "tensor-fp16 = -1"), "'tensor-fp16'"),
        (lambda t: t.replace("cuda-fp64 = 1.29\n", ""), "'cuda-fp64'"),
        (lambda t: t.replace("tensor-fp16 = 165.2", "tensor-fp16 = 165.2\ntensor-fp4 = 1"), "'peak-tflops.tensor-fp4'"),
        (lambda t: t.replace('l2-mb = "', 'l2-mbytes = "'), "'sources.l2-mbytes'"),
        (lambda t: t.replace('sm-count = "NVIDIA', 'xsm = "NVIDIA'), "sources"),
        (lambda t: t.replace('kind = "gpu"', 'kind = "tpu"'), "'kind'"),
        (lambda t: t.replace("gemm-tile = [128, 128, 32]", "gemm-tile = [128, 0, 32]"), "'gemm-tile'"),
        (lambda t: t.replace("launch-overhead-us = 5", 'launch-overhead-us = "5"'), "'launch-overhead-us'"),
    ],
)
def test_bad_spec_file_is_exit_2_naming_the_key(tmp_path, capsys, edit, named):
    path = tmp_path / "mine.toml"
    path.write_text(edit(GOOD))
    assert main([f"{NETS}:TinyNet", "--input-shape", "1,3,32,32", "--device-spec", str(path)]) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1 and "Traceback" not in err


def test_cpu_spec_missing_field_and_negative(tmp_path, capsys):
    good = (DIR / "cpu-example.toml").read_text()
    for text, named in (
        (good.replace("cores = 2\n", ""), "'cores'"),
        (good.replace("cache-mb = 32", "cache-mb = -32"), "'cache-mb'"),
    ):
        path = tmp_path / "cpu.toml"
        path.write_text(text)
        assert main([f"{NETS}:TinyNet", "--input-shape", "1,3,32,32", "--device-spec", str(path)]) == 2
        assert named in capsys.readouterr().err


def test_unknown_name_lists_builtins(capsys):
    assert main([f"{NETS}:TinyNet", "--input-shape", "1,3,32,32", "--device-spec", "rtx9090"]) == 2
    err = capsys.readouterr().err
    assert "rtx9090" in err and "rtx4090" in err


def test_a_gpu_spec_may_give_its_memory_with_a_source():
    import tomllib

    from archlint.devices import parse, resolve
    from archlint.errors import UsageError

    assert resolve("l4").memory_bytes == 24 * 2**30 and resolve("t4").memory_bytes == 16 * 2**30
    data = tomllib.loads((DIR / "l4.toml").read_text(encoding="utf-8"))
    del data["sources"]["memory-gib"]
    with pytest.raises(UsageError, match="sources.memory-gib"):
        parse(data, "l4")
    del data["memory-gib"]
    assert parse(data, "l4").memory_bytes is None  # optional: a spec without it has no "does it fit"


def test_a_gpu_spec_may_give_its_own_measured_shares():
    import dataclasses

    import tomllib

    from archlint.devices import parse, resolve
    from archlint.devices.achieved import SHARES, shares_for
    from archlint.errors import UsageError

    h200 = resolve("h200")
    value, low, high = h200.achieved["stream"]  # archlint calibrate --families on a lent H200
    assert 0 < low <= value <= high <= 1 and set(h200.achieved) == set(SHARES)
    shares = shares_for(h200)
    assert shares["stream"].value == value and "h200" in shares["stream"].source
    partial = dataclasses.replace(h200, achieved={k: v for k, v in h200.achieved.items() if k != "cuda-core"})
    assert shares_for(partial)["cuda-core"] == SHARES["cuda-core"]  # not measured there: the built-in
    assert shares_for(resolve("rtx4090")) == SHARES
    data = tomllib.loads((DIR / "h200.toml").read_text(encoding="utf-8"))
    for bad, named in (
        ({"stream": [0.9, 0.6, 0.8]}, "achieved.stream"),
        ({"tensor-gem": [0.5, 0.4, 0.6]}, "achieved.tensor-gem"),
    ):
        with pytest.raises(UsageError, match=named):
            parse({**data, "achieved": bad}, "h200")
    del data["sources"]["achieved"]
    with pytest.raises(UsageError, match="sources.achieved"):
        parse(data, "h200")


def test_the_spec_own_shares_move_the_estimate():
    import dataclasses

    from archlint.devices import resolve
    from archlint.model.estimating import estimate

    op = {
        "kind": "elementwise",
        "flops": 0,
        "mac_bytes": 400_000_000,
        "in_shapes": [[100_000_000]],
        "out_shapes": [[100_000_000]],
    }
    h200 = resolve("h200")
    own = estimate.estimate_op(op, h200, "float16").ms
    builtin = estimate.estimate_op(op, dataclasses.replace(h200, achieved={}), "float16").ms
    # stream: the H200's own measured share against the built-in 86% (A100 trace)
    assert own / builtin == pytest.approx(0.86 / h200.achieved["stream"][0], rel=1e-3)


def test_cpu_spec_takes_interconnect_for_ranks_over_gloo():
    """benchmarks/this_cpu_gloo.toml: processes over gloo (a CPU spec once refused [interconnect])."""
    spec = load_file(ROOT / "benchmarks" / "this_cpu_gloo.toml")
    assert spec.kind == "cpu" and set(spec.interconnect) == {"intra-node-gbs", "intra-node-latency-us"}
    assert "measured here" in spec.sources["interconnect"]
