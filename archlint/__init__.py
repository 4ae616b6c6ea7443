"""archlint: an efficiency linter for PyTorch models and training code.

The public API (each name documented in archlint.api):

    archlint.analyze(model_or_target, *inputs, **options) -> archlint.Analysis
    archlint.lint(paths, fix=False, **options) -> list[archlint.Diagnostic]
    archlint.UsageError                 bad input, with the CLI's one-line message
    archlint.testing.assert_budget(...) budgets in a test suite (also a pytest plugin)

Nothing here imports torch until a model is analyzed.
"""

__version__ = "0.1.0"

from archlint.api import Analysis, analyze, lint  # noqa: E402
from archlint.diagnostics import Diagnostic, Price, Severity  # noqa: E402
from archlint.errors import UsageError  # noqa: E402

__all__ = ["Analysis", "Diagnostic", "Price", "Severity", "UsageError", "analyze", "lint", "__version__"]
