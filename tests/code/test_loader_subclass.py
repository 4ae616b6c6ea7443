"""A DataLoader subclass that passes its arguments through (DeepSpeech's AudioDataLoader) builds a
DataLoader: AL301/AL304 read the call's arguments. One that sets pin_memory or num_workers itself
is left alone (the call's arguments do not say what the loader gets)."""

from __future__ import annotations

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.engine import lint_text
from archlint.code.facts import Facts

SCRIPT = """import torch
from torch.utils import data


class PaddedLoader(data.DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.collate_fn = lambda b: b
{EXTRA}

def train(dataset, model, optimizer):
    loader = PaddedLoader(dataset, batch_size=8, shuffle=True)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        optimizer.step()
"""

OWN_SETTINGS = """

class PinnedLoader(data.DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, pin_memory=True, num_workers=8, **kwargs)
"""


def _codes(text: str) -> list[tuple[int, str]]:
    return sorted((d.line, d.code) for d in lint_text(text, "train.py") if d.code in ("AL301", "AL304"))


def test_subclass_call_is_a_dataloader():
    assert _codes(SCRIPT.replace("{EXTRA}", "")) == [(12, "AL301"), (12, "AL304")]


def test_subclass_that_sets_its_own_workers_and_pinning_is_not_judged():
    text = SCRIPT.replace("{EXTRA}", OWN_SETTINGS).replace("loader = PaddedLoader(", "loader = PinnedLoader(")
    facts = Facts(cst.parse_module(text), text)
    assert df.loader_classes(facts) == {"PaddedLoader"}
    assert _codes(text) == []


PYG = """import torch
import torch.nn.functional as F
from torch_geometric.loader import DataLoader


def train(dataset, model, optimizer):
    device = torch.device("cuda")
    loader = {LOADER}
    for data in loader:
        data = data.to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(data.x, data.edge_index, data.batch), data.y)
        loss.backward()
        optimizer.step()
"""


def test_library_subclass_pytorch_geometric():
    assert _codes(PYG.replace("{LOADER}", "DataLoader(dataset, 128, shuffle=True)")) == [(8, "AL301"), (8, "AL304")]
    # negative twin: workers and pinning set
    assert (
        _codes(PYG.replace("{LOADER}", "DataLoader(dataset, 128, shuffle=True, num_workers=4, pin_memory=True)")) == []
    )
    # its 4th positional argument onwards are not torch's (follow_batch, exclude_keys): not judged
    assert _codes(PYG.replace("{LOADER}", "DataLoader(dataset, 128, True, ['x'], None)")) == []
