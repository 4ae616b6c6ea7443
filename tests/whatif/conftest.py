from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Roofline peaks (measured by --latency) cached once per session in a private directory."""
    monkeypatch.setenv("ARCHLINT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "archlint-cache"))
