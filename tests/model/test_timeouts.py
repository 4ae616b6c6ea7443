"""Issue 24 items 9 and 14: --what-if with compile does not poison the other timings (nor print
"0.00×"); --timeout covers --latency, --what-if and the pricing of findings, and holds against a
bare `except:` in a loop; `archlint loader` has a timeout; a thread the model leaves running does
not keep archlint alive after its report. Hangs run in a subprocess with a hard timeout, so that
a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import archlint

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]


def archlint_run(*args: str, limit: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT), "CI": "1"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "archlint", *args], capture_output=True, text=True, env=env, timeout=limit
    )
    return proc, time.perf_counter() - start


def write(tmp_path: Path, body: str, name: str = "m") -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


# A forward that returns while archlint captures it (proxies and the first real calls), then never.
HANGS_LATER = """
import time
import torch
from torch import nn

CALLS = [0]

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":
            CALLS[0] += 1
            while CALLS[0] > {calls}:
                {spin}
        return self.conv(x)
"""


def test_timeout_covers_latency(tmp_path):
    # capture calls it a few times; --latency's passes (warm-up + 2 × repeat) many more
    target = write(tmp_path, HANGS_LATER.format(calls=30, spin="time.sleep(0.01)")) + ":Net"
    proc, took = archlint_run(target, "--input-shape", "1,3,8,8", "--latency", "--timeout", "20")
    assert proc.returncode == 2, proc.stderr  # was: never returned (the latency stage had no timeout)
    assert "after --timeout 20 s" in proc.stderr and "(latency)" in proc.stderr
    assert took < 110


def test_a_bare_except_in_a_loop_cannot_swallow_the_timeout(tmp_path):
    target = (
        write(
            tmp_path,
            """
        import time
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                while True:
                    try:
                        while True:
                            time.sleep(0.01)
                    except:  # noqa: E722  swallows archlint's stop, whatever it is
                        pass
    """,
        )
        + ":Net"
    )
    proc, took = archlint_run(target, "--input-shape", "1,3,8,8", "--timeout", "2")
    assert proc.returncode == 2  # was: the alarm's exception was swallowed, the loop went on forever
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "did not stop when told to" in err[0] and "bare `except:`" in err[0]
    assert took < 90  # --timeout, the grace, and a slow start-up on a busy machine (was: for ever)


def test_the_loader_has_a_timeout(tmp_path):
    target = (
        write(
            tmp_path,
            """
        import threading
        from torch.utils.data import Dataset

        class Blocks(Dataset):
            def __len__(self):
                return 100

            def __getitem__(self, i):
                threading.Event().wait()  # never set
    """,
        )
        + ":Blocks"
    )
    proc, took = archlint_run("loader", target, "--workers", "none", "--timeout", "2")
    assert proc.returncode == 2  # was: hung for ever
    assert "after --timeout 2 s" in proc.stderr and "Traceback" not in proc.stderr
    assert took < 60


def test_a_thread_left_running_does_not_keep_archlint_alive(tmp_path):
    target = (
        write(
            tmp_path,
            """
        import threading, time
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                threading.Thread(target=time.sleep, args=(3600,), name="model-worker").start()

            def forward(self, x):
                return self.fc(x)
    """,
        )
        + ":Net"
    )
    proc, took = archlint_run(target, "--input-shape", "2,4", "--output-format", "json")
    assert proc.returncode in (0, 1), proc.stderr  # was: alive for an hour after the report
    assert '"models"' in proc.stdout  # the report is out, whole
    assert "model-worker" in proc.stderr and "exits without waiting" in proc.stderr
    assert took < 60


# --what-if with compile ------------------------------------------------------------------------------

SEEN: list[int] = []  # torch's intra-op thread count at each call of the uncompiled model


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        SEEN.append(torch.get_num_threads())
        return self.fc(x)


def test_compile_does_not_change_the_threads_the_other_what_ifs_are_timed_with(monkeypatch):
    from archlint.config import Settings
    from archlint.model.speedups import run, transforms

    threads = torch.get_num_threads()

    class Compiled(nn.Module):  # what a compilation can do to the process: other threads from now on
        def __init__(self, model):
            super().__init__()
            self.model, self.first = model, True

        def forward(self, x):
            if self.first:
                self.first = False
                torch.set_num_threads(threads + 1)
            return self.model.fc(x)

    def fake_compile(v):
        return v.with_("compile", "fake", model=Compiled(v.model), compiled=True)

    monkeypatch.setitem(transforms.ORDER, "compile", fake_compile)
    SEEN.clear()
    results, _ = run.what_ifs(
        Probe(), (torch.randn(2, 4),), "cpu", Settings(warmup=1, repeat=6), ["inference-mode", "compile"]
    )
    try:
        assert {w.name for w in results if w.applicable} >= {"inference-mode", "compile"}
        # every call of the plain model before the compilation, and the baseline's after it, saw the
        # threads the process had (was: inference-mode and the baseline timed after it on other threads)
        assert SEEN and set(SEEN[: SEEN.index(threads + 1)] if threads + 1 in SEEN else SEEN) == {threads}
        assert torch.get_num_threads() == threads  # put back
    finally:
        torch.set_num_threads(threads)


def test_compile_is_prepared_after_the_other_what_ifs_are_timed(monkeypatch):
    from archlint.config import Settings
    from archlint.model.speedups import run, transforms

    events: list[str] = []
    real_time = run._time

    def recording_time(base, variants, *a, **k):
        events.append("time " + ",".join(variants))
        return real_time(base, variants, *a, **k)

    def fake_compile(v):
        events.append("compile")
        return v.with_("compile", "fake", compiled=True)

    monkeypatch.setattr(run, "_time", recording_time)
    monkeypatch.setitem(transforms.ORDER, "compile", fake_compile)
    run.what_ifs(Probe(), (torch.randn(2, 4),), "cpu", Settings(warmup=1, repeat=6), ["inference-mode", "compile"])
    assert events[:3] == ["time inference-mode", "compile", "time compile"]  # was: compile first, one sample


@pytest.mark.parametrize("ratio, shown", [(0.0047, "0.0047×"), (1.234, "1.23×"), (0.5, "0.50×"), (12.0, "12.00×")])
def test_a_speedup_never_reads_zero(ratio, shown):
    from archlint.report.what_if_table import times

    assert times(ratio) == shown  # was: f"{0.0047:.2f}×" == "0.00×"
