"""Every model rule page's Example fires its rule and its Use-instead does not.

Convention (rules/README.md): the first ```python block under `## Example` and under
`## Use instead` is a complete module defining `Net` (an nn.Module class built with no arguments)
and `INPUT_SHAPE` (a tuple), optionally `DTYPE` ("float16", ...) and `MODE` ("eval" | "train").
A block that sets `OPTIMIZER` (an --optimizer name, "adamw", "adamw-fused") is a training
step: the harness analyzes it with --train and that optimizer (the rules that read the step, AL611).
The harness builds Net, captures and costs it with archlint's own layers, runs every model
rule with default options and checks the page's code is (not) among the findings.
"""

from __future__ import annotations

import re

import pytest
import torch

from archlint import registry

from ._graphs import findings, opgraph

MODEL_PAGES = sorted(code for code, r in registry.catalog().items() if r.scope == "model")


def snippet(page: str, section: str) -> str:
    body = page.split(f"## {section}\n", 1)
    assert len(body) == 2, f"page has no '## {section}' section"
    match = re.search(r"```python\n(.*?)```", body[1].split("\n## ", 1)[0], re.S)
    assert match, f"'## {section}' has no ```python block"
    return match.group(1)


def run_snippet(code: str, source: str) -> list[str]:
    namespace: dict = {"__name__": f"rule_page_{source}"}
    exec(compile(code, source, "exec"), namespace)
    model = namespace["Net"]()
    dtype = getattr(torch, namespace.get("DTYPE", "float32"))
    model = model.to(dtype)
    if "OPTIMIZER" in namespace:  # a training step: the --train analysis, as the CLI runs it
        import archlint

        step = archlint.analyze(model, namespace["INPUT_SHAPE"], train=True, optimizer=namespace["OPTIMIZER"])
        return [d.code for d in step.result.diagnostics]
    graph = opgraph(model, namespace["INPUT_SHAPE"], mode=namespace.get("MODE", "eval"), dtype=dtype)
    return [d.code for d in findings(graph)]


def test_every_model_rule_has_a_page_and_a_check():
    from archlint.model.checks import check_modules

    checks = {m.CODE for m in check_modules()}
    assert checks == set(MODEL_PAGES)


@pytest.mark.parametrize("code", MODEL_PAGES)
def test_example_fires(code):
    page = registry.get(code).page
    assert code in run_snippet(snippet(page, "Example"), f"{code}-example")


@pytest.mark.parametrize("code", MODEL_PAGES)
def test_use_instead_is_silent(code):
    page = registry.get(code).page
    assert code not in run_snippet(snippet(page, "Use instead"), f"{code}-use-instead")


@pytest.mark.parametrize("code", MODEL_PAGES)
def test_page_documents_options_and_silencing(code):
    from archlint.model.checks import check_modules

    page = registry.get(code).page
    module = next(m for m in check_modules() if m.CODE == code)
    for option in module.OPTIONS:
        assert f"`{option}`" in page, f"{code} page does not document option {option}"
    assert "module-ignores" in page
    for section in ("What it does", "Why it is slow", "Example", "Use instead", "Options", "References"):
        assert f"## {section}\n" in page


def test_archlint_rule_prints_the_page(capsys):
    from archlint import cli

    assert cli.main(["rule", "AL101"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# unbalanced-channels (AL101)") and "module-ignores" in out
