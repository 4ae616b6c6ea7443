"""--what-if as a new user meets it (issue 39, item 11): how long it will take is said before it
starts and kept (within twice that), int8-dynamic counts the layers that run, "base ms" has one
format in every row, torch.compile's worker threads are not blamed on the model, and torch's
notice about this machine's CUDA set-up is not printed."""

from __future__ import annotations

import io
import logging
import re
import threading
from pathlib import Path

import torch
from rich.console import Console
from torch import nn

from archlint import cli, progress
from archlint.model.speedups.run import PREPARE_S, SLACK_S, _quiet_notices, compile_seconds, expected_seconds
from archlint.model.speedups.transforms import Variant, int8_dynamic, refused
from archlint.report.what_if_table import print_what_if
from archlint.result import WhatIf
from archlint.whatif_names import NAMES

MODELS = str(Path(__file__).with_name("models.py"))


class Unused(nn.Module):
    """Four blocks, each with a Linear it never calls."""

    def __init__(self):
        super().__init__()
        self.fc = nn.ModuleList([nn.Linear(16, 16) for _ in range(4)])
        self.unused = nn.ModuleList([nn.Linear(16, 16) for _ in range(4)])

    def forward(self, x):
        for layer in self.fc:
            x = layer(x).relu()
        return x


def test_int8_dynamic_counts_and_quantizes_only_the_layers_that_run():
    model = Unused().eval()
    v = int8_dynamic(Variant(model, (torch.randn(2, 16),), torch.device("cpu")))
    assert v.detail.startswith("4 Linear/LSTM layers that run quantized to int8")
    assert "4 more never run in forward, left as they are" in v.detail
    assert all(type(m) is nn.Linear for m in v.model.unused)  # the unused ones are not converted


def test_base_ms_has_one_format_in_every_row():
    rows = [
        WhatIf("bf16", True, "autocast", baseline_ms=636.2, transformed_ms=2283.0, speedup=0.28, spread=(0.27, 0.29)),
        WhatIf("fold-bn", True, "folded", baseline_ms=0.07812, transformed_ms=0.0701, speedup=1.1, spread=(1.0, 1.2)),
    ]
    buffer = io.StringIO()
    print_what_if(rows, Console(file=buffer, width=250))
    text = buffer.getvalue()
    assert "e+" not in text and "e-" not in text  # never scientific notation
    assert re.search(r"│\s+636\s+│\s+2283\s+│", text) and re.search(r"│\s+0\.0781\s+│\s+0\.0701\s+│", text)


def test_the_estimate_grows_with_the_model_and_counts_compiling():
    plain = expected_seconds(0.01, ["bf16", "fold-bn"], 50, True, 100)
    assert expected_seconds(0.1, ["bf16", "fold-bn"], 50, True, 100) > plain > 0
    with_compile = expected_seconds(0.01, ["bf16", "fold-bn", "compile"], 50, True, 100)
    assert with_compile > plain + 0.15 * 100
    # compiling slows with the load, less than in proportion (its builds run in worker processes)
    assert expected_seconds(0.01, ["compile"], 50, True, 100, load=4.0) > 2.5 * expected_seconds(
        0.01, ["compile"], 50, True, 100
    )


def test_the_estimate_counts_what_each_what_if_really_does():
    """Issue 45: lstm_lm's what-ifs were estimated at 8.5× their time: every what-if counted, the
    ones that do not apply included, with 3 first calls and every pass at 2× the model's. Now: a
    0.1 s model, --repeat 12, warm-up on, inference-mode and compile the only ones that apply."""
    base, ops = 0.1, 40
    out = frozenset(NAMES) - {"inference-mode", "compile"}
    # plain group: 7 of the 8 names' share of 1.5 × 12 passes' time, over 2 runs of 0.1 s -> 7 passes;
    # compile's group: 1/8 of it -> 5 passes at least; each run 1 warm-up pass; the combination (the
    # two can go together) on a third of 1.5 × 12 passes' time -> 5 passes at least
    plain = PREPARE_S + base + (7 + 1) * 2 * base
    compiled = PREPARE_S + base + (5 + 1) * 2 * base + compile_seconds(ops) + base
    combination = PREPARE_S + base + (5 + 1) * 2 * base
    expected = expected_seconds(base, list(NAMES), 12, True, ops, 1.0, out)
    assert abs(expected - (base + plain + compiled + combination)) < 1e-9
    # a what-if ruled out by its checks costs nothing; one left in costs its making, calls and passes
    assert expected_seconds(base, ["fold-bn"], 12, True, ops, 1.0, frozenset({"fold-bn"})) == base
    alone = expected_seconds(base, ["inference-mode"], 12, True, ops)
    assert abs(alone - (base + PREPARE_S + base + (9 + 1) * 2 * base)) < 1e-9


def test_the_cheap_checks_rule_out_what_will_not_apply():
    lstm = nn.LSTM(8, 8)
    v = Variant(lstm, (torch.randn(2, 3, 8),), torch.device("cpu"))
    assert refused("fold-bn", v) == "no BatchNorm layer"
    assert refused("channels-last", v).startswith("no 2-D convolution")
    assert refused("fp16", v).startswith("fp16 autocast is for CUDA")
    assert refused("int8-dynamic", v) is refused("bf16", v) is refused("sdpa", v) is refused("compile", v) is None


def test_the_estimate_is_said_before_it_starts_and_kept(capsys):
    code = cli.main(
        [
            f"{MODELS}:ConvBN",
            "--input-shape",
            "2,3,16,16",
            "--what-if=fold-bn,inference-mode",
            "--warmup",
            "1",
            "--repeat",
            "3",
            "--output-format",
            "json",
        ]
    )
    assert code in (0, 1)
    err = capsys.readouterr().err
    said = re.search(
        r"archlint: --what-if on .*ConvBN: 2 transformations, about (\d+) s \(an estimate from the "
        r"model's measured time",
        err,
    )
    assert said, err
    quiet = cli.main(
        [
            f"{MODELS}:ConvBN",
            "--input-shape",
            "2,3,16,16",
            "--what-if=fold-bn",
            "--warmup",
            "1",
            "--repeat",
            "3",
            "-q",
            "--output-format",
            "json",
        ]
    )
    out = capsys.readouterr()
    assert quiet in (0, 1) and "about" not in out.err  # -q: nothing said
    import json

    note = next(n for n in json.loads(out.out)["models"][0]["notes"] if n.startswith("what-ifs: took"))
    took, expected = (float(x) for x in re.match(r"what-ifs: took (\d+) s against (\d+) s estimated", note).groups())
    assert took <= max(2 * expected, expected + SLACK_S) + 1


def test_torch_compiles_worker_threads_are_not_blamed_on_the_model(capsys, monkeypatch):
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="ThreadPoolExecutor-99_0")
    worker.start()

    def exit_(code):
        raise SystemExit(code)

    monkeypatch.setattr(cli.os, "_exit", exit_)
    try:
        try:
            cli._exit_past_threads(0)
        except SystemExit:
            pass
        assert "ThreadPoolExecutor-99_0" in capsys.readouterr().err  # a thread the model's code left: said
        progress.own_threads([worker])  # what --what-if's torch.compile started
        try:
            cli._exit_past_threads(0)
        except SystemExit:
            pass
        assert "ThreadPoolExecutor-99_0" not in capsys.readouterr().err
    finally:
        stop.set()
        worker.join()


def test_torchs_notice_about_the_machines_cuda_setup_is_not_printed():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("torch.utils.cpp_extension")
    logger.addHandler(handler)
    try:
        with _quiet_notices(debug=False):
            logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
        assert stream.getvalue() == ""
        with _quiet_notices(debug=True):  # --debug shows everything
            logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
        assert "No CUDA runtime" in stream.getvalue()
    finally:
        logger.removeHandler(handler)


def test_the_benchmark_reads_the_estimate_and_the_time_taken_from_the_note():
    # benchmarks/what_if.py prints expected vs actual from the note the what-ifs end with
    import importlib.util

    from archlint.units import duration

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "what_if.py"
    spec = importlib.util.spec_from_file_location("what_if_bench", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    note = f"what-ifs: took {duration(342)} against {duration(40)} estimated (from the model's measured time)"
    assert bench.expected_and_took(["other note", note]) == (40, 342)
    assert bench.expected_and_took(["no such note"]) is None
