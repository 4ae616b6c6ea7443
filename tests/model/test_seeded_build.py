"""A model archlint builds gets the same random weights on every run (issue 46): a count that
depends on their values (a detector's heads run on the boxes its weights produce) is then the
same on every run, and the caller's own random stream is not moved by the build."""

from __future__ import annotations

import textwrap

import torch

import archlint

MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Gated(nn.Module):
        """Keeps the rows its random weights score above zero, then projects them: a data-dependent
        head, as a detector's box head runs on the detections its weights produce."""

        def __init__(self):
            super().__init__()
            self.score = nn.Linear(16, 1)
            self.head = nn.Linear(16, 256)

        def forward(self, x):
            keep = self.score(x).squeeze(-1) > 0
            return self.head(x[keep])


    def example_inputs():
        return (torch.linspace(-1, 1, 64 * 16).reshape(64, 16),)
''')


def test_the_same_flops_whatever_the_callers_seed_and_its_stream_untouched(tmp_path):
    path = tmp_path / "gated.py"
    path.write_text(MODEL)
    flops = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        expected = torch.rand(4)
        torch.manual_seed(seed)
        result = archlint.analyze(f"{path}:Gated", quiet=True).to_dict()["models"][0]
        flops.append(result["totals"]["flops"])
        assert torch.equal(torch.rand(4), expected)  # the build drew from its own seeded stream
    assert len(set(flops)) == 1, flops


def test_the_note_says_data_dependent_parts_ran_on_random_weights(tmp_path):
    path = tmp_path / "gated2.py"
    path.write_text(MODEL)
    notes = archlint.analyze(f"{path}:Gated", quiet=True).to_dict()["models"][0]["notes"]
    assert any("fixed seed" in n and "random weights produced" in n for n in notes), notes
