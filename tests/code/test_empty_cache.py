"""AL420 empty-cache-every-step, beyond its fixtures (tests/fixtures/code/empty_cache_steps*.py):
the step a call runs at decides, and the findings agree with the rule's declaration."""

from __future__ import annotations

import pytest

from archlint.code.checks import rules
from archlint.code.engine import lint_text
from archlint.declarations import disagreements

LOOP = """
import torch
for step, (x, y) in enumerate(loader):
    loss = model(x.cuda()).sum()
    loss.backward()
    optimizer.step()
{call}
"""


@pytest.mark.parametrize(
    "call, fires",
    [
        ("    torch.cuda.empty_cache()", True),
        ("    torch.cuda.memory.empty_cache()", True),
        ("    if args.low_memory:\n        torch.cuda.empty_cache()", True),  # a setting: every step of that run
        ("    if step % 100 == 0:\n        torch.cuda.empty_cache()", False),
        ("torch.cuda.empty_cache()", False),  # after the loop
        ("    torch.cuda.synchronize()", False),
    ],
)
def test_the_step_rate_decides(call, fires):
    found = lint_text(LOOP.format(call=call), "train.py")
    assert disagreements(found, rules()) == []
    assert ("AL420" in {d.code for d in found}) is fires


def test_an_aliased_import_is_followed():
    source = "from torch.cuda import empty_cache\n" + LOOP.format(call="    empty_cache()")
    assert "AL420" in {d.code for d in lint_text(source, "train.py")}


def test_a_helper_without_backward_is_silent():
    source = (
        "import torch\n\ndef log_memory():\n    torch.cuda.empty_cache()\n    return torch.cuda.memory_allocated()\n"
    )
    assert lint_text(source, "util.py") == []
