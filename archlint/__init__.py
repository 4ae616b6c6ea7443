"""archlint: an efficiency linter for PyTorch models and training code."""

__version__ = "0.1.0"
