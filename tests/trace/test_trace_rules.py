"""Each trace rule fires on its positive synthetic trace and not on its negative one; the pages."""

from __future__ import annotations

import re

import pytest

from archlint import registry
from archlint.config import Settings
from archlint.trace.checks import modules, rank_modules, rules
from archlint.trace.command import lint_trace
from tests.trace.scenarios import SCENARIOS, fp32_gemm
from tests.trace.synth import P100

ALL_TRACE_RULES = sorted(code for code, r in registry.catalog().items() if r.scope == "trace")
CROSS_RANK = {m.CODE for m in rank_modules()}  # several ranks of one job: tests/trace/test_ranks.py
TRACE_RULES = [code for code in ALL_TRACE_RULES if code not in CROSS_RANK]


def codes(trace, tmp_path) -> dict:
    path = trace.write(tmp_path / "t.json")
    _, diagnostics = lint_trace(path, Settings())
    return {d.code: d for d in diagnostics}


def test_every_trace_check_has_a_page_and_a_scenario():
    assert {m.CODE for m in modules()} == set(TRACE_RULES) == set(SCENARIOS)
    assert {m.CODE for m in modules() + rank_modules()} == set(ALL_TRACE_RULES)


@pytest.mark.parametrize("code", TRACE_RULES)
def test_positive_trace_fires(code, tmp_path):
    found = codes(SCENARIOS[code](True), tmp_path)
    assert code in found
    d = found[code]
    if not rules()[code].price:  # a rule declaring no price basis prices nothing (archlint.declarations)
        assert d.price is None
        if code == "AL510":  # says what is left out of the prices and how to re-record
            assert "schedule(wait=" in d.message and d.evidence["rerecord"] in d.message
        return
    # the bucket is measured; the share of it the fix returns is an estimate, its basis in the evidence
    assert d.price.basis == "estimated" and d.price.saving_ms > 0 and 0 < d.price.saving_share <= 1
    assert d.price.whole == "step time"
    assert all(b["basis"] for b in d.evidence["buckets"].values())


@pytest.mark.parametrize("code", TRACE_RULES)
def test_negative_trace_is_silent(code, tmp_path):
    assert code not in codes(SCENARIOS[code](False), tmp_path)


def test_fp32_gemm_needs_tensor_cores(tmp_path):
    assert "AL504" not in codes(fp32_gemm(True, device=P100), tmp_path)


def test_sync_points_at_the_user_frame(tmp_path):
    d = codes(SCENARIOS["AL503"](True), tmp_path)["AL503"]
    assert (d.file, d.line) == ("train.py", 12)
    # the 3 ms idle stretch after the sync: the sync is charged the 2.8 ms the host was blocked in it
    # while the GPU still ran (the lead it gave up); the 0.2 ms after it returned is host work
    assert d.evidence["sync_idle_us"] == pytest.approx(2800, abs=1)
    assert d.price.saving_ms == pytest.approx(0.8 * 2.8, abs=0.01)


def test_idle_warning_says_why(tmp_path):
    d = codes(SCENARIOS["AL501"](True), tmp_path)
    assert "AL509" in d and "DataLoader" in d["AL509"].message and "AL501" in d["AL509"].message
    assert d["AL509"].evidence["cause"] == "input"


@pytest.mark.parametrize("code", ALL_TRACE_RULES)
def test_page_sections_and_options(code):
    rule = registry.get(code)
    for heading in ("What it does", "Why it is slow", "Example", "Use instead", "Options", "Fix safety", "References"):
        assert re.search(rf"^## {heading}\s*$", rule.page, re.MULTILINE), f"{code}: no '## {heading}'"
    assert rule.path.name.startswith(f"{code}-{rule.name}")
    module = next(m for m in modules() + rank_modules() if m.CODE == code)
    from archlint.config import documented_options

    assert documented_options(rule.body) == set(module.OPTIONS)  # config validates --option against the page
    for section in ("Example", "Use instead"):  # the training code behind such a trace parses
        body = rule.page.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
        block = re.search(r"```python\n(.*?)```", body, re.S)
        assert block, f"{code}: no python block under {section}"
        compile(block.group(1), f"{code}-{section}", "exec")


def test_idle_over_half_the_gpu_span_also_warns(tmp_path):
    """Each step 40% idle on the host's clock, but long pauses between steps: HTA's temporal
    breakdown finds the GPU idle for most of its span, and that is said too."""
    from tests.trace.synth import GEMM, Trace

    t = Trace()
    for n in range(3):
        start = 1_000_000.0 + n * 40_000
        t.step(n + 1, start, 10_000)
        t.gpu(GEMM, start + 100, 6_000, start + 50)
    d = codes(t, tmp_path)["AL509"]
    # 40% of each step is idle (host work); AL509 claims the share of it the waterfall says a fix returns
    assert d.evidence["idle_share_of_span"] > 0.7 and d.price.saving_share == pytest.approx(0.4 * 0.3, abs=0.01)
    assert "temporal breakdown: idle 74% of the GPU span" in d.message


def test_model_parallel_is_not_data_parallel(tmp_path):
    from tests.trace.scenarios import data_parallel

    assert "AL506" not in codes(data_parallel(False, model_parallel=True), tmp_path)


def test_idle_warning_names_what_the_host_was_doing(tmp_path):
    from tests.trace.synth import GEMM, steps

    def build(t, s):
        t.gpu(GEMM, s + 100, 2_000, s + 50)
        t.host("user_annotation", "## backward ##", s + 2_000, 7_000)
        t.host("user_annotation", "Optimizer.step#AdamW.step", s + 3_000, 5_000)  # nested: the innermost is named
        t.gpu(GEMM, s + 9_000, 900, s + 8_950)

    d = codes(steps(build), tmp_path)["AL509"]
    assert "meanwhile the host was in Optimizer.step#AdamW.step (5 ms), ## backward ## (1.9 ms)" in d.message
