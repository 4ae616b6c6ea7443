"""`archlint MODEL --latency` end to end, through the real load → capture → cost → measure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from archlint.cli import main

NETS = str(Path(__file__).parents[3] / "examples" / "nets.py")
FAST = ["--input-shape", "1,3,32,32", "--warmup", "1", "--repeat", "3", "--exit-zero"]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def _run_json(capsys, *args) -> dict:
    code = main([f"{NETS}:TinyNet", *FAST, "--latency", "--output-format", "json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)["models"][0]


@pytest.mark.parametrize("device", DEVICES)
def test_json_has_latency_per_layer_and_in_totals(capsys, device):
    model = _run_json(capsys, "--device", device)
    layers = model["layers"]
    assert layers
    for layer in layers:  # every op of a replayed fx graph is timed, views included
        ms = layer["latency_ms"]
        assert isinstance(ms, float) and math.isfinite(ms) and ms > 0, layer["name"]
        assert layer["latency_spread_ms"][0] <= ms <= layer["latency_spread_ms"][1]
    computing = [la for la in layers if la["mac_bytes"] > 0 and la["known"]]
    assert computing and all(la["roofline"]["bound"] in ("memory", "compute") for la in computing)
    totals = model["totals"]
    assert totals["latency_ms"] > 0 and math.isfinite(totals["latency_ms"])
    assert totals["latency_ms_sum_of_ops"] == pytest.approx(sum(la["latency_ms"] for la in layers))
    assert "median of 3 passes" in model["timing"]
    assert model["roofline"]["peak_flops_per_s"] > 0


def test_export_graphs_are_replayed_op_by_op(capsys):
    model = _run_json(capsys, "--strategy", "export")
    assert model["strategy"] == "export"
    assert model["timing"].startswith("per op: export graph replayed node by node")
    assert all(la["latency_ms"] > 0 for la in model["layers"])


def test_dispatch_graphs_are_timed_per_module(capsys):
    model = _run_json(capsys, "--strategy", "dispatch")
    assert model["strategy"] == "dispatch"
    assert model["timing"].startswith("per module: forward hooks")
    assert any("cannot be replayed op by op" in n for n in model["notes"])
    by_module: dict[str, list[dict]] = {}
    for la in model["layers"]:
        by_module.setdefault(la["module"], []).append(la)
    for module in ("stem.0", "stem.1", "block1.conv1", "block2.bn2", "fc"):  # one op per leaf module
        (layer,) = by_module[module]
        assert layer["latency_ms"] > 0, module
    # functional ops inside block1's forward (F.relu, +) have no module of their own to time
    assert all(la["latency_ms"] is None for la in by_module["block1"])
    assert model["totals"]["latency_ms"] > 0 and model["totals"]["latency_ms_sum_of_ops"] > 0


def test_without_latency_nothing_is_timed(capsys):
    code = main([f"{NETS}:TinyNet", "--input-shape", "1,3,32,32", "--exit-zero", "--output-format", "json"])
    model = json.loads(capsys.readouterr().out)["models"][0]
    assert code == 0
    assert model["totals"]["latency_ms"] is None and model["timing"] is None
    assert all(la["latency_ms"] is None for la in model["layers"])


def test_text_report_shows_where_the_time_goes(capsys):
    assert main([f"{NETS}:TinyNet", *FAST, "--latency"]) == 0
    out = capsys.readouterr().out
    assert "ms end to end" in out and "summed over ops" in out
    assert "share of op time: compute" in out and "timed ops" in out


@pytest.mark.parametrize("device", DEVICES)
def test_trace_holds_one_range_per_layer(capsys, tmp_path, device):
    model = _run_json(capsys, "--device", device, "--trace", str(tmp_path))
    (trace_file,) = tmp_path.glob("*.pt.trace.json")
    events = json.loads(trace_file.read_text())["traceEvents"]
    ranges = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert sorted(ranges) == sorted(la["display"] for la in model["layers"])  # as every report names ops
    assert any(str(trace_file) in note for note in model["notes"])


def test_trace_alone_implies_latency(capsys, tmp_path):
    code = main([f"{NETS}:TinyNet", *FAST, "--trace", str(tmp_path), "--output-format", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["models"][0]["totals"]["latency_ms"] > 0
    assert list(tmp_path.glob("*.pt.trace.json"))


def test_device_cuda_without_cuda_exits_2_with_one_line(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([f"{NETS}:TinyNet", *FAST, "--latency", "--device", "cuda"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        f"archlint: error: --device cuda: CUDA is not available on this machine (torch {torch.__version__}); "
        "use --device cpu"
    ]


def test_out_of_memory_exits_2_suggesting_a_smaller_batch(capsys, monkeypatch):
    import archlint.model.timing.measure as measure

    def oom(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 68719476736 bytes.")

    monkeypatch.setattr(measure, "sample", oom)
    assert main([f"{NETS}:TinyNet", *FAST, "--latency"]) == 2
    # the one error line, after what --latency said before it started timing (measure.forecast)
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("archlint: --latency on")]
    assert len(err) == 1
    assert err[0].startswith("archlint: error: ran out of CPU memory on cpu while timing")
    assert "1x3x32x32" in err[0] and "try a smaller batch" in err[0]


KEYWORD_ONLY = """
import transformers
from torch import nn


class Encoder(nn.Module):
    \"\"\"A 2-layer BERT taking its inputs by keyword only, as a serving wrapper does.\"\"\"

    def __init__(self):
        super().__init__()
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                         intermediate_size=128, vocab_size=100)
        self.bert = transformers.BertModel(config)

    def forward(self, *, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
"""


@pytest.mark.parametrize("strategy", ["export", "dispatch"])
def test_keyword_only_inputs_are_timed(capsys, tmp_path, strategy):
    """Keyword-only inputs (input_ids, attention_mask) reach every timed pass: the export replay op
    by op, the leaf-module hooks of the dispatch recording, and the model end to end."""
    pytest.importorskip("transformers")
    (tmp_path / "encoder.py").write_text(KEYWORD_ONLY)
    argv = [
        f"{tmp_path / 'encoder.py'}:Encoder",
        "--input",
        "input_ids=1,16:int64",
        "--input",
        "attention_mask=1,16:bool",
        "--latency",
        "--warmup",
        "1",
        "--repeat",
        "3",
        "--strategy",
        strategy,
        "--exit-zero",
        "--output-format",
        "json",
    ]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    model = json.loads(out.out)["models"][0]
    assert model["strategy"] == strategy
    assert [i["name"] for i in model["inputs"]] == ["input_ids", "attention_mask"]
    assert model["totals"]["latency_ms"] > 0
    timed = [la for la in model["layers"] if la["latency_ms"] is not None]
    if strategy == "export":  # replayed op by op: every op has its time
        assert len(timed) == len(model["layers"])
    else:  # hooks: the ops alone in their leaf module (Linear, LayerNorm, Embedding)
        assert len(timed) >= 2 * 6 and all(la["latency_ms"] > 0 for la in timed)


def test_keyword_only_inputs_in_what_ifs(capsys, tmp_path):
    """--what-if calls every variant with the keyword-only inputs; the fx-based ones say why not."""
    pytest.importorskip("transformers")
    (tmp_path / "encoder.py").write_text(KEYWORD_ONLY)
    argv = [
        f"{tmp_path / 'encoder.py'}:Encoder",
        "--input",
        "input_ids=1,16:int64",
        "--input",
        "attention_mask=1,16:bool",
        "--what-if",
        "inference-mode,sdpa",
        "--repeat",
        "3",
        "--exit-zero",
        "--output-format",
        "json",
    ]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    what_if = {w["name"]: w for w in json.loads(out.out)["models"][0]["what_if"]}
    assert what_if["inference-mode"]["applicable"] and what_if["inference-mode"]["speedup"] > 0
    assert what_if["inference-mode"]["max_abs_diff"] == 0
    assert not what_if["sdpa"]["applicable"] and "keyword-only inputs" in what_if["sdpa"]["reason"]
