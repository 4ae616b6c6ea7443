"""Fixtures of the latency tests; tests marked `cuda` are skipped without a CUDA device."""

from __future__ import annotations

import pytest
import torch

from .graphs import Small


def pytest_collection_modifyitems(items):
    for item in items:
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Roofline peaks are measured once per test session, cached in a private directory."""
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "archlint-cache"))


@pytest.fixture
def settings(tmp_path):
    from archlint.config import Settings

    return Settings(latency=True, warmup=2, repeat=5, root=tmp_path)


@pytest.fixture
def small():
    torch.manual_seed(0)
    return Small().eval(), (torch.randn(2, 3, 16, 16),)
