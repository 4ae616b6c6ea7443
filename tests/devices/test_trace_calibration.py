"""The measured shares in archlint/devices/achieved.py are what the real A100 trace gives."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from archlint.devices.achieved import SHARES

ROOT = Path(__file__).resolve().parents[2]
TRACE = Path("/work/shared/traces/a100_alexnet_inference.json.gz")


@pytest.mark.skipif(not TRACE.exists(), reason="the shared A100 trace is not on this machine")
def test_shares_match_the_trace():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "trace_calibration.py")], capture_output=True, text=True, check=True
    ).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"(\S+) .*mean (\d+)%\s+range (\d+)%-(\d+)%", line)
        if m:
            found.setdefault(m.group(1), []).append(tuple(int(g) / 100 for g in m.groups()[1:]))
    for name in ("tensor-gemm", "stream", "broadcast", "window"):
        ((mean, low, high),) = found[name]
        s = SHARES[name]
        assert (s.value, s.low, s.high) == pytest.approx((mean, low, high), abs=0.005), name
    cuda = found["cuda-core"]
    assert SHARES["cuda-core"].value == pytest.approx(max(m for m, _, _ in cuda), abs=0.005)
    assert SHARES["cuda-core"].low == pytest.approx(min(lo for _, lo, _ in cuda), abs=0.005)
