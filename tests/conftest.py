"""archlint's own test suite: a model rule that fails is a test failure here (in users' runs it is a
note and the other results stand; archlint.model.checks._strict). Set for the processes the tests
start too."""

import os

os.environ.setdefault("ARCHLINT_STRICT_RULES", "1")
