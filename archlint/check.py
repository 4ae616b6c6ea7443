"""The one path through archlint: lint code paths, analyze model specs, apply the gate.

The command line and the Python API both call `check`; they differ only in where settings come
from and what is done with the RunResult (a report and an exit code, or an Analysis object).
"""

from __future__ import annotations

from pathlib import Path

from archlint import progress
from archlint.config import ModelSpec, Settings
from archlint.errors import UsageError
from archlint.result import RunResult


def check(paths: list[Path], specs: list[ModelSpec], settings: Settings) -> RunResult:
    if not paths and not specs:
        raise UsageError("nothing to check: give PATH.py:NAME for a model or files/directories to lint")
    with progress.shown(settings):
        return _check(paths, specs, settings)


def _check(paths: list[Path], specs: list[ModelSpec], settings: Settings) -> RunResult:
    result = RunResult()
    if paths:
        from archlint.code.lint import lint_paths

        code = lint_paths(paths, settings)
        result.diagnostics += code.diagnostics
        result.files_checked, result.fixed, result.fixed_edits = code.files_checked, code.fixed, code.edits
    decoded = []  # --decode steps, one more model each
    analyzed = []  # the specs whose model was analyzed: budgets pair them with result.models
    for spec in specs:
        try:
            from archlint.model.analyze import analyze
            from archlint.model.runtime.isolate import own_modules
            from archlint.model.runtime.patches import as_found
        except ImportError as exc:
            raise UsageError(
                f"the model analyzer needs torch ({exc.name} is missing): pip install 'archlint[models]'"
            ) from None
        try:
            # its folder's `layers.py` is its own, not an earlier target's; torch as it was before
            # any target was imported, whatever this one patches (F.conv2d = ...)
            with own_modules(spec) as own, as_found() as patched:
                with progress.task(f"analyzing {spec.target}"):
                    model_result, diagnostics = analyze(spec, settings)
                if spec.decode is not None:
                    from archlint.model.decode import analyze_decode

                    with progress.task(f"analyzing a decode step of {spec.target}"):
                        decoded.append(analyze_decode(spec, settings))
                own.forget_target = bool(patched.by_model)  # imported again next time: its patch made again
            if patched.note():
                model_result.notes.append(patched.note())
        except UsageError as exc:
            if len(specs) + len(paths) == 1:
                raise
            result.errors.append(str(exc))  # one bad model never costs the others their report
            continue
        analyzed.append(spec)
        result.models.append(model_result)
        result.diagnostics += diagnostics
    result.models += decoded  # after the prefills: budgets pair specs with the first models
    if paths and any(m.what_if or m.phase == "train" for m in result.models):
        from archlint.code.checks import price_with_models  # AL403 priced by the model's autocast what-if

        price_with_models(result.diagnostics, result.models)
    if paths and result.models:
        from archlint.model.links import link_distributed  # AL410/AL415 against the analyzed model

        link_distributed(result.diagnostics, result.models, settings)

    from archlint import gate  # budgets for models; baselines for models and code alike

    result.gate = gate.evaluate(result, analyzed, settings)
    return result


def failed(result: RunResult) -> bool:
    """Findings that are not info, or a failed gate: exit 1 on the command line."""
    from archlint import gate

    return gate.fails(result.diagnostics) or any(not g.passed for g in result.gate) or bool(result.errors)
