"""One meaning of "fits" everywhere: what the device needs is within the budget, and every figure
printed says the same as the JSON (issue 39, item 1).

Over several models, batches and device specs: whenever the text says "fits", the figure it prints
for what the device needs is at or under the budget it prints, and the JSON's `fits` agrees; every
AL610 way says "fits" exactly when its own figure (the memory model run with that change) is within
the budget, and its JSON `fits_after` agrees."""

import re

import pytest
import torch
import torchvision
from torch import nn

import archlint

UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
SIZE = r"([0-9.]+) (B|KB|MB|GB|TB)"


def _bytes(number: str, unit: str) -> float:
    return float(number) * UNITS[unit]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        return self.head(self.blocks(x).mean(1))


def tower():
    return nn.Sequential(*[nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 64)) for _ in range(6)])


CASES = [  # (id, model, input shape, device spec, budget in bytes or None for the spec's memory)
    ("resnet18-l4-over", torchvision.models.resnet18, (512, 3, 224, 224), "l4", 8 * 10**9),
    ("resnet18-t4-fits", torchvision.models.resnet18, (32, 3, 224, 224), "t4", None),
    ("encoder-h100-over", Encoder, (64, 512, 256), "h100-sxm", 3 * 10**9),
    ("tower-cpu-over", tower, (4096, 64), None, 20 * 10**6),
    ("mobilenet-cpu-fits", torchvision.models.mobilenet_v3_small, (16, 3, 224, 224), None, 10**9),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def analysis(request):
    _, build, shape, spec, budget = request.param
    torch.manual_seed(0)
    options = {"train": True, "optimizer": "adamw", "show_info": True}
    if spec:
        options["device_spec"] = spec
    if budget:
        options["memory_budget"] = f"{budget}B"  # bytes: a bare number has no unit (refused)
    return archlint.analyze(build(), shape, **options)


def test_the_fit_line_says_fits_exactly_when_its_figure_is_within_its_budget(analysis):
    memory = analysis.to_dict()["models"][0]["memory"]
    line = next(x for x in analysis.summary().splitlines() if "memory over the step" in x)
    verdict = re.search(r"(does not fit|fits) in " + SIZE, line)
    assert verdict, line
    budget = _bytes(verdict.group(2), verdict.group(3))
    needed = re.search(r"the device needs " + SIZE, line) or re.search(r"peak " + SIZE, line)
    figure = _bytes(needed.group(1), needed.group(2))
    says_fits = verdict.group(1) == "fits"
    assert says_fits == (figure <= budget), line
    assert says_fits == memory["fits"] == (memory["needed_bytes"] <= memory["budget_bytes"])
    assert memory["device"] in line  # the device the answer is for, named (item 9)
    if memory.get("max_batch") is not None and analysis.model.input_shapes[0][0] <= memory["max_batch"]:
        assert memory["fits"], "the batch is within the largest that fits, so it fits"


def test_each_way_to_fit_says_fits_exactly_when_its_own_figure_is_within_the_budget(analysis):
    doc = analysis.to_dict()
    memory = doc["models"][0]["memory"]
    ways = [d for d in doc["diagnostics"] if d["code"] == "AL610"]
    assert bool(ways) == (not memory["fits"])
    for d in ways:
        ev = d["evidence"]
        said = re.search(r"the device then needs " + SIZE + r": (fits in|still over) " + SIZE, d["message"])
        assert said, d["message"]
        figure, budget = _bytes(said.group(1), said.group(2)), _bytes(said.group(4), said.group(5))
        assert (said.group(3) == "fits in") == ev["fits_after"] == (figure <= budget), d["message"]
        assert ev["fits_after"] == (ev["needed_after_bytes"] <= ev["budget_bytes"])
        assert ev["memory_saved_bytes"] == ev["peak_bytes"] - ev["needed_after_bytes"] > 0
        assert ev["saving_basis"].startswith("measured by the memory model")  # never a subtraction
    if not memory["fits"]:
        assert any(d["evidence"]["fits_after"] for d in ways), "at least one way makes it fit"
        text = analysis.summary()
        for d in ways:
            assert d["message"] in text


def test_without_a_device_spec_the_fit_line_names_this_machine(tmp_path, capsys):
    from archlint.cli import main

    (tmp_path / "net.py").write_text(
        "from torch import nn\n\ndef net():\n    return nn.Sequential(nn.Linear(64, 64), nn.ReLU())\n"
    )
    assert main(
        [f"{tmp_path / 'net.py'}:net", "--input-shape", "32,64", "--train", "--memory-budget", "16GiB", "-q"]
    ) in (0, 1)
    line = next(x for x in capsys.readouterr().out.splitlines() if "memory over the step" in x)
    assert re.search(r" fits in [0-9.]+ GB on cpu \(this machine; no --device-spec\)", line), line  # 16 GiB
