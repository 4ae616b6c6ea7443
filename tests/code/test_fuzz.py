"""Fuzzing the code linter through the CLI with -j 2 (bounded: ~10 s of CPU; benchmarks/lint_fuzz.py runs
longer): generated programs and mutated training scripts never cause an internal error, each
file's findings are what it gets alone, and what CPython compiles is never an AL000 error."""

from __future__ import annotations

import itertools

from fuzzing import batches, check_batch
from hypothesis import HealthCheck, given, settings

_runs = itertools.count()


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(files=batches())
def test_fuzz_lint_j2(tmp_path_factory, files):
    folder = tmp_path_factory.mktemp("fuzz") / f"batch{next(_runs)}"
    check_batch(folder, files)
