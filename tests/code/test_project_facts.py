"""The project facts' schema (project_facts.py): what a file tells the project travels as JSON (the
cache, the workers' pipes) and comes back as the same typed facts; a cached entry of another shape
is refused, and a context says something exactly when one of its fields does."""

from __future__ import annotations

import json

import pytest

from archlint.code.engine import analyze_text
from archlint.code.project import light
from archlint.code.project_facts import FileFacts, ImportFact, LoaderFact, ProjectContext

TRAIN = """import torch
from torch.utils.data import DataLoader

def build(ds):
    return DataLoader(ds, batch_size=8)

def train(model, loader, opt):
    for x, y in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        opt.step()
"""


def test_file_facts_round_trip_through_json():
    summary = analyze_text(TRAIN, "train.py", summarize=True).summary
    facts = FileFacts.from_json(json.loads(json.dumps(summary)))
    assert facts.to_json() == summary
    loader = facts.defs["build"]["loader"]
    assert isinstance(loader, LoaderFact) and (loader.pin, loader.workers, loader.holder) == (
        "false",
        "missing",
        "build",
    )
    assert facts.cuda and not facts.light
    assert "train" in facts.defs and facts.defs["train"]["backward"] == 1


def test_light_facts_are_the_same_type_with_only_names():
    facts = light("from .models import Net\ndef make(cfg):\n    return Net(cfg)\n")
    assert facts.light and facts.imports == [ImportFact("Net", "models", "Net", 1)]
    assert facts.defs == {"make": {"params": ["cfg"]}}
    assert not facts.cuda and facts.uses == []
    assert light("def (:\n") is None


def test_facts_of_another_shape_are_refused():
    with pytest.raises(TypeError):
        FileFacts.from_json({"imports": [], "no_such_fact": 1})
    with pytest.raises(TypeError):
        FileFacts.from_json(["not", "an", "object"])
    assert FileFacts.from_json(None) is None


def test_a_context_says_something_when_a_field_does():
    assert not ProjectContext() and ProjectContext().to_json() == {}
    context = ProjectContext(cuda=True, feeds_cuda=["build"])
    assert context and context.to_json() == {"cuda": 1, "feeds_cuda": ["build"]}
    assert ProjectContext(driver=True)  # a torch-free file read in full because it drives project code
    assert context.name("build") == {} and ProjectContext(names={"build": {"batch": 1}}).name("build") == {"batch": 1}
