"""Device specs: every built-in validates and cites its sources; a bad file is exit 2 naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from archlint.cli import main
from archlint.devices import DIR, builtin_names, load_file

ROOT = Path(__file__).resolve().parents[2]
NETS = str(ROOT / "examples" / "nets.py")
REQUIRED = {"rtx3090", "rtx4090", "rtx5090", "a100-sxm", "a100-pcie", "h100-sxm", "h100-pcie", "h200", "l4", "l40s", "t4", "cpu-example"}


def test_builtins_validate_and_cite_every_figure():
    assert REQUIRED <= set(builtin_names())
    for name in builtin_names():
        spec = load_file(DIR / f"{name}.toml")
        assert spec.name == name
        assert spec.sources and all(text.strip() for text in spec.sources.values())
        assert spec.bandwidth > 0 and spec.sms > 0


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
        (lambda t: t.replace('kind = "gpu"', 'kind = "gpu"\nboost-clock-ghz = 2.5'), "'boost-clock-ghz'"),  # unknown key
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
    for text, named in ((good.replace("cores = 2\n", ""), "'cores'"), (good.replace("cache-mb = 32", "cache-mb = -32"), "'cache-mb'")):
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
