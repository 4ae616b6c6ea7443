"""Issue 24: hostile model code, at import, in the constructor and in forward, through
`archlint.analyze` and the command line. Whatever the code does, archlint either reports or says
in one line why it could not (a UsageError, exit 2): no traceback, no hang past --timeout + 10 s,
and the user's model, inputs and process (random generators, grad mode, default dtype, cwd,
sys.path) are as they were. The unmarked sample runs in CI; the full cross product is slow."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import archlint
from archlint.errors import UsageError

numpy = pytest.importorskip("numpy")

PACKAGE_ROOT = Path(archlint.__file__).resolve().parents[1]
TIMEOUT = 2.0

# What hostile code does, anywhere it runs.
ANYWHERE = {
    "sys_exit": "sys.exit(3)",
    "os_exit": "os._exit(0)",
    "keyboard_interrupt": "raise KeyboardInterrupt",
    "endless_loop": "while True:\n    pass",
    "bare_except_loop": "while True:\n    try:\n        time.sleep(0.01)\n    except Exception:\n        pass",
    "prints": "print('hostile output')",
    "chdir": "os.chdir('/')",
    "reseeds": "torch.manual_seed(7)\nrandom.seed(7)\nnumpy.random.seed(7)\ntorch.rand(5)",
    "grad_off": "torch.set_grad_enabled(False)",
    "default_dtype": "torch.set_default_dtype(torch.float64)",
    "edits_sys_path": "sys.path.insert(0, '/hostile/nowhere')\nsys.path.append('/hostile/elsewhere')",
    "rebinds_sys_path": "sys.path = ['/hostile/only']",
    "raises": "raise ValueError('hostile')",
    "recursion": "def again():\n    return again()\nagain()",
    "memory_error": "raise MemoryError('hostile')",
    "warns": "warnings.warn('hostile warning')",
}
# What hostile code does in forward, to the model and its input.
IN_FORWARD = {
    "mutates_input": "x.mul_(2)",
    "sets_attribute": "self.batch = x.shape[0]",
    "counts_calls": "self.calls += 1",
    "fills_cache": "self.cache['x'] = x",
    "mutates_buffer": "self.step += 1",
    "creates_module": "self.extra = nn.Linear(8, 8)\nx = self.extra(x)",
    "branches_on_values": "if x.sum() > 0:\n    x = x + 1",
    "returns_nan": "return self.fc(x) * float('nan')",
    "returns_none": "return None",
    "lazy_module": "x = self.lazy(x)",
}

SOURCE = """
import logging, os, random, sys, time, warnings
import numpy
import torch
from torch import nn

{at_import}

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.lazy = nn.LazyLinear(8)
        self.calls, self.cache = 0, {{}}
        self.register_buffer("step", torch.zeros((), dtype=torch.long))
{at_init}

    def forward(self, x):
{at_forward}
        return self.fc(x)
"""


def source(place: str, code: str) -> str:
    slots = {"at_import": "", "at_init": "", "at_forward": ""}
    slots[f"at_{place}"] = textwrap.indent(code, "" if place == "import" else " " * 8)
    return SOURCE.format(**slots)


def process_state():
    return (
        torch.random.get_rng_state().clone(),
        random.getstate(),
        numpy.random.get_state()[1].copy(),
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        os.getcwd(),
        list(sys.path),
    )


def same_state(before, after) -> list[str]:
    names = ("torch RNG", "Python RNG", "NumPy RNG", "grad mode", "default dtype", "cwd", "sys.path")
    equal = (
        torch.equal(before[0], after[0]),
        before[1] == after[1],
        bool((before[2] == after[2]).all()),
        *(a == b for a, b in zip(before[3:], after[3:])),
    )
    return [name for name, ok in zip(names, equal) if not ok]


# os._exit runs only in a child process (test_hostile_targets_in_one_command_line_run): were the
# guard to fail, it would end the test run itself with exit code 0, a suite that "passed".
IN_PROCESS = [n for n in ANYWHERE if n != "os_exit"]
CASES = (
    [("import", n) for n in IN_PROCESS]
    + [("init", n) for n in IN_PROCESS]
    + [("forward", n) for n in itertools.chain(IN_PROCESS, IN_FORWARD)]
)
# The CI sample: every forward behaviour, and the ones that end, hang or change the process elsewhere.
SAMPLE = {("forward", n) for n in itertools.chain(IN_PROCESS, IN_FORWARD)} | {
    ("import", "endless_loop"),
    ("import", "rebinds_sys_path"),
    ("import", "prints"),
    ("init", "chdir"),
    ("init", "reseeds"),
    ("init", "grad_off"),
    ("init", "default_dtype"),
    ("init", "sys_exit"),
}


def _param(case):
    marks = () if case in SAMPLE else (pytest.mark.slow,)
    return pytest.param(*case, marks=marks, id=f"{case[0]}-{case[1]}")


@pytest.mark.parametrize("place,name", [_param(c) for c in CASES])
def test_hostile_target_through_the_api(tmp_path, place, name):
    code = {**ANYWHERE, **IN_FORWARD}[name]
    target = tmp_path / f"hostile_{place}_{name}.py"
    target.write_text(source(place, code))
    before = process_state()
    start = time.monotonic()
    try:
        analysis = archlint.analyze(f"{target}:Net", input_shape=(2, 8), timeout=TIMEOUT, select=["AL2"])
    except UsageError as exc:  # one line naming the problem
        assert "\n" not in str(exc) and str(exc), str(exc)
    else:
        assert analysis.totals.flops >= 0 and json.loads(analysis.to_json(), parse_constant=_reject)
    assert time.monotonic() - start < TIMEOUT + 10
    assert same_state(before, process_state()) == []


@pytest.mark.parametrize(
    "name", list(IN_FORWARD) + ["prints", "chdir", "reseeds", "grad_off", "default_dtype", "raises"]
)
def test_hostile_forward_leaves_the_users_model_and_inputs(tmp_path, name):
    code = {**ANYWHERE, **IN_FORWARD}[name]
    namespace: dict = {}
    exec(compile(source("forward", code), f"hostile_{name}.py", "exec"), namespace)
    model = namespace["Net"]()
    model.lazy(torch.randn(2, 8))  # initialised, as in a model the user has run
    x = torch.randn(2, 8)
    x0, state0 = x.clone(), {k: v.clone() for k, v in model.state_dict().items()}
    attributes = dict(model.__dict__)
    modules = dict(model._modules)
    before = process_state()
    try:
        archlint.analyze(model, x, latency=True, warmup=0, repeat=1, timeout=TIMEOUT, select=["AL2"])
    except UsageError as exc:
        assert "\n" not in str(exc), str(exc)
    assert same_state(before, process_state()) == []
    assert torch.equal(x, x0)
    assert model.__dict__.keys() == attributes.keys() and dict(model._modules) == modules
    assert model.calls == 0 and model.cache == {}
    state = model.state_dict()
    assert state.keys() == state0.keys() and all(torch.equal(state[k], state0[k]) for k in state0)


def _reject(name):
    raise ValueError(f"{name} in JSON")


def test_hostile_targets_in_one_command_line_run(tmp_path):
    """One `--models` run over hostile targets: a JSON report for those that could be analyzed,
    one line for each that could not, exit 2, no traceback, within the timeouts."""
    cases = [
        ("forward", "os_exit"),
        ("init", "os_exit"),
        ("import", "os_exit"),
        ("forward", "endless_loop"),
        ("forward", "prints"),
        ("init", "chdir"),
        ("forward", "raises"),
        ("forward", "mutates_input"),
        ("forward", "branches_on_values"),
        ("forward", "returns_nan"),
        ("forward", "creates_module"),
    ]
    picked = [f"{place}_{name}" for place, name in cases]
    entries = []
    for place, name in cases:
        (tmp_path / f"{place}_{name}.py").write_text(source(place, {**ANYWHERE, **IN_FORWARD}[name]))
        entries.append(f'[[tool.archlint.models]]\ntarget = "{place}_{name}.py:Net"\ninput-shapes = ["2,8"]\n')
    (tmp_path / "pyproject.toml").write_text(f"[tool.archlint]\ntimeout = {TIMEOUT}\n\n" + "\n".join(entries))
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "archlint", "--models", "--output-format", "json", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - start
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    assert run.returncode == 2, run.stderr
    report = json.loads(run.stdout, parse_constant=_reject)
    analyzed = {m["target"].split(".py")[0] for m in report["models"]}
    failed = {n for n in picked if any(f"{n}.py:Net" in e for e in report["errors"])}
    assert len(report["errors"]) == len(failed)
    assert analyzed | failed == set(picked) and not analyzed & failed
    assert {"forward_os_exit", "init_os_exit", "import_os_exit", "forward_endless_loop", "forward_raises"} <= failed
    assert {"forward_prints", "init_chdir", "forward_mutates_input"} <= analyzed
    errors = [line for line in run.stderr.splitlines() if line.startswith("archlint: error: ")]
    assert len(errors) == len(failed)
    assert elapsed < 60 + len(picked) * (TIMEOUT + 10)
