"""Zero ops without a cost formula over the model zoo (issue 15): every torchvision builder, 300 timm
models and a few Hugging Face language models, with the cases of benchmarks/zoo_unknown_ops.py.

The full sweep is slow-marked; a small sample of models that hit the ops with the newest formulas
(detection's roi_align/nms/unique, eva02's type_as, a no_grad block, BERT from a config) runs in CI.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_unknown_ops.py"


def _zoo():
    spec = importlib.util.spec_from_file_location("zoo_unknown_ops", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zoo = _zoo()


def _cases(family: str):
    if family == "torchvision":
        return list(zoo.torchvision_cases())
    if family == "timm":
        pytest.importorskip("timm")
        return list(zoo.timm_cases(300))
    pytest.importorskip("transformers")
    return list(zoo.hf_cases())


def _check(case):
    name, build, inputs, strategy = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            row = zoo.run_case(name, build, inputs, strategy, limit=300)
        finally:
            logging.disable(logging.NOTSET)
    assert "error" not in row, row
    assert row["unknown"] == {}, row


SAMPLE = {
    "torchvision/fasterrcnn_mobilenet_v3_large_320_fpn",
    "torchvision/raft_small",
    "timm/eva02_tiny_patch14_224",
    "hf/bert",
}


def _sample():
    found = [c for c in zoo.torchvision_cases() if c[0] in SAMPLE]
    if importlib.util.find_spec("timm"):
        found += list(zoo.timm_cases(0, ["eva02_tiny_patch14_224"]))
    if importlib.util.find_spec("transformers"):
        found += [c for c in zoo.hf_cases() if c[0] in SAMPLE]
    return found


def test_timm_sample_is_300_names_from_every_family():
    pytest.importorskip("timm")
    names = zoo.timm_names(300)
    assert len(names) == len(set(names)) == 300
    assert len({n.split("_")[0].rstrip("0123456789") for n in names}) > 100


@pytest.mark.parametrize("case", _sample(), ids=lambda c: c[0])
def test_sample_has_no_unknown_ops(case):
    _check(case)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["torchvision", "timm", "hf"])
def test_zoo_has_no_unknown_ops(family):
    failures = []
    for case in _cases(family):
        try:
            _check(case)
        except AssertionError as exc:
            failures.append(str(exc)[:300])
    assert not failures, "\n".join(failures)
