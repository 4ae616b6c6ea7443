"""Where the fx capture says each functional op is called (findings point there), found by a walk of
the live frames (capture/callsite.py, issue 45) instead of torch's per-node stack trace text: the
same line as before in every case, the text torch would have recorded still there for an error
that quotes it, and no stack formatted per node."""

from __future__ import annotations

import inspect
from pathlib import Path
from unittest import mock

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn
from torch.utils._traceback import CapturedTraceback

from archlint.model.analyze import analyze_model
from archlint.model.capture import CaptureFailed, capture, is_leaf
from archlint.model.capture.graph import user_frame


def _gate(x):
    return torch.sigmoid(x) * x  # GATE


def _gated(x):
    return _gate(x) + 1


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self._mix(_gated(self.fc(x)))

    def _mix(self, y):
        return F.gelu(y).mean(-1, keepdim=True) + y  # MIX


_NAMESPACE: dict = {}
exec("def generated(x):\n    return x.relu() * 2\n", {}, _NAMESPACE)  # a file named "<string>": not the user's


class _Net(nn.Module):
    """Ops in a helper two calls down, in another method, in a lambda, in generated code, and in
    torch's own code (Unfold, traced through): each case of the search."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(_Block(), _Block())
        self.act = lambda t: t * torch.tanh(t)  # ACT
        self.unfold = nn.Sequential(nn.Unfold(1))

    def forward(self, x):
        x = self.act(self.blocks(x))
        x = _NAMESPACE["generated"](x)
        return self.unfold(x.softmax(-1).unsqueeze(0))


def _line(marker: str) -> int:
    lines = Path(__file__).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


class _TorchTracer(fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return is_leaf(m)


def _torch_stack_traces(model: nn.Module) -> dict[str, str | None]:
    """Node name → the stack trace torch records itself (what the capture read before issue 45)."""
    tracer = _TorchTracer()
    tracer.record_stack_traces = True
    return {n.name: n.stack_trace for n in tracer.trace(model).nodes}


def test_each_op_is_located_where_torchs_own_stack_trace_puts_it():
    model = _Net().eval()
    graph, _ = capture(model, (torch.randn(2, 4, 8),), "fx")
    expected = {name: user_frame(text) for name, text in _torch_stack_traces(model).items()}
    ops = [(n, d) for n, d in graph.nodes(data=True) if d.get("op") and not str(d["op"]).startswith("nn.")]
    assert len(ops) >= 10
    for name, data in ops:
        assert data.get("source") == expected[name], name
    sources = {tuple(d["source"]) for _, d in ops if d.get("source")}
    assert (__file__, _line("GATE")) in sources  # the helper's line, two calls below the forward
    assert (__file__, _line("MIX")) in sources
    assert (__file__, _line("ACT")) in sources
    unfold = next(d for n, d in ops if d["op"] == "F.unfold")
    assert unfold["source"] == [__file__, inspect.getsourcelines(_Net.forward)[1] + 3]  # torch's code: its caller


class _Outer(nn.Module):
    """Calls the analysis from inside its own forward: torch's stack then starts at this frame."""

    def forward(self, model, x):
        return analyze_model(model, (x,))  # OUTER


def test_an_op_without_a_user_frame_of_its_own_takes_the_one_outside_the_trace():
    only_torch = nn.Sequential(nn.Linear(8, 8), nn.Unfold(1))
    graph, _ = _Outer()(only_torch, torch.randn(1, 2, 4, 8))
    unfold = next(d for _, d in graph.nodes(data=True) if d.get("op") == "F.unfold")
    assert unfold["source"] == [__file__, _line("OUTER")]
    graph, _ = analyze_model(only_torch, (torch.randn(1, 2, 4, 8),))  # no forward outside: none
    assert next(d for _, d in graph.nodes(data=True) if d.get("op") == "F.unfold").get("source") is None


class _NonZero(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.nonzero(self.fc(x))  # no meta kernel: the fx propagation fails here


def test_a_failing_op_is_quoted_with_the_stack_trace_torch_records():
    model = _NonZero().eval()
    try:
        capture(model, (torch.randn(2, 8),), "fx")
    except CaptureFailed as failed:
        message = str(failed)
    else:
        raise AssertionError("the fx capture of torch.nonzero on meta was expected to fail")
    recorded = _torch_stack_traces(model)["nonzero"]
    assert recorded and f"Original traceback:\n{recorded}" in message


def test_no_stack_is_formatted_per_node():
    calls = []
    summary = CapturedTraceback.summary
    with mock.patch.object(CapturedTraceback, "summary", lambda self: calls.append(1) or summary(self)):
        graph, _ = capture(_Net().eval(), (torch.randn(2, 4, 8),), "fx")
    assert len(graph) > 10 and calls == []  # was: one symbolized, formatted stack per node
