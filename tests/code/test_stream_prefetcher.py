"""A CUDA-stream prefetcher (apex's data_prefetcher, timm's PrefetchLoader) is recognised: its
copies satisfy AL302 and a loop over it is a batch loop fed by the loader it wraps."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from archlint.code import dataflow as df
from archlint.code.engine import lint_text
from archlint.code.facts import CallSite, Facts

SCRIPT = Path(__file__).parents[1] / "fixtures" / "code" / "stream_prefetcher.py"
SIDE_STREAM = '''            with torch.cuda.stream(stream):
                next_x = next_x.to("cuda")
                next_y = next_y.to("cuda")'''
DEFAULT_STREAM = '''            next_x = next_x.to("cuda")
            next_y = next_y.to("cuda")'''


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
    # the same copies on the default stream, from the same pinned loader, are reported
    moved = [d for d in lint_text(text.replace(SIDE_STREAM, DEFAULT_STREAM), "prefetch.py") if d.code == "AL302"]
    assert [d.line for d in moved] == [42, 43]
