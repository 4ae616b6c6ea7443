"""A CUDA-stream prefetcher (apex's data_prefetcher, timm's PrefetchLoader) is recognised: its
copies satisfy AL302 and a loop over it is a batch loop fed by the loader it wraps."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.engine import lint_text
from archlint.code.facts import CallSite, Facts

SCRIPT = Path(__file__).parents[1] / "fixtures" / "code" / "stream_prefetcher.py"
SIDE_STREAM = """            with torch.cuda.stream(stream):
                next_x = next_x.to("cuda")
                next_y = next_y.to("cuda")"""
DEFAULT_STREAM = """            next_x = next_x.to("cuda")
            next_y = next_y.to("cuda")"""

HANDOVER = "            torch.cuda.current_stream().wait_stream(stream)\n"


def _facts(text: str) -> Facts:
    return Facts(cst.parse_module(text), text)


def test_prefetcher_classes_found():
    assert df.prefetchers(_facts(SCRIPT.read_text())) == {"DataPrefetcher", "StreamLoader"}


def test_loops_over_a_prefetcher_are_fed_by_its_loader():
    facts = _facts(SCRIPT.read_text())
    training = [bl for bl in df.batch_loops(facts) if bl.is_training]
    assert len(training) == 2  # `while x is not None: ... prefetcher.next()` and `for x, y in StreamLoader(loader)`
    for bl in training:
        assert isinstance(bl.source, CallSite) and facts.qname(bl.source.node.func) == df.DATALOADER
        assert bl.batch_names == ["x", "y"]


def test_copies_on_the_side_stream_satisfy_al302():
    text = SCRIPT.read_text()
    assert SIDE_STREAM in text
    assert "AL302" not in {d.code for d in lint_text(text, "prefetch.py")}
    # the same copies on the default stream of a class that is no prefetcher (no hand-over), from the
    # same pinned loader, are reported
    plain = text.replace(SIDE_STREAM, DEFAULT_STREAM).replace(HANDOVER, "")
    moved = [d for d in lint_text(plain, "prefetch.py") if d.code == "AL302"]
    assert [d.line for d in moved] == [42, 43]


PARTIAL_STREAM = """import torch
from functools import partial
from torch.utils.data import DataLoader


class PrefetchLoader:
    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        stream = torch.cuda.Stream()
        stream_context = partial(torch.cuda.stream, stream=stream)
        first = True
        for next_input, next_target in self.loader:
            with stream_context():
                next_input = next_input.to(device="cuda")
                next_target = next_target.to(device="cuda")
            if not first:
                yield inp, target
            first = False
            torch.cuda.current_stream().wait_stream(stream)
            inp, target = next_input, next_target
        yield inp, target


def train(model, dataset):
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
    for x, y in PrefetchLoader(loader):
        model(x).sum().backward()
"""


def test_stream_entered_through_partial_counts():
    """timm's PrefetchLoader enters its stream with `partial(torch.cuda.stream, stream=stream)`."""
    assert "AL302" not in {d.code for d in lint_text(PARTIAL_STREAM, "loader.py")}
    plain = PARTIAL_STREAM.replace("            torch.cuda.current_stream().wait_stream(stream)\n", "")
    assert plain != PARTIAL_STREAM
    assert [d.line for d in lint_text(plain, "loader.py") if d.code == "AL302"] == [16, 17]  # not a prefetcher


DEVICE_MODULE_STREAM = (
    PARTIAL_STREAM.replace(
        "        stream = torch.cuda.Stream()\n        stream_context = partial(torch.cuda.stream, stream=stream)\n",
        '        device_mod = getattr(torch, "cuda")\n        stream = device_mod.Stream()\n'
        "        stream_context = partial(device_mod.stream, stream=stream)\n",
    )
    .replace("wait_stream(stream)", "wait_stream(stream)", 1)
    .replace("torch.cuda.current_stream().wait_stream", "device_mod.current_stream().wait_stream")
)


def test_stream_made_through_a_device_module_counts():
    """Current timm makes its stream as `device_mod.Stream()` (`device_mod = getattr(torch, device.type)`)."""
    assert "device_mod.Stream()" in DEVICE_MODULE_STREAM and "torch.cuda.Stream" not in DEVICE_MODULE_STREAM
    facts = _facts(DEVICE_MODULE_STREAM)
    assert df.prefetchers(facts) == {"PrefetchLoader"}
    assert "AL302" not in {d.code for d in lint_text(DEVICE_MODULE_STREAM, "loader.py")}
    # negative twin: the same class without the hand-over is no prefetcher, its copies are reported
    plain = DEVICE_MODULE_STREAM.replace("            device_mod.current_stream().wait_stream(stream)\n", "")
    assert plain != DEVICE_MODULE_STREAM and df.prefetchers(_facts(plain)) == set()
    assert [d.line for d in lint_text(plain, "loader.py") if d.code == "AL302"] == [17, 18]
