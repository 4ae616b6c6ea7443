"""`archlint loader PATH.py:NAME`: measure a data pipeline, and whether it can feed a model.

load.py resolves the target into a DataLoader; measure.py times it (throughput, stages of one
sample, scaling with num_workers); verdict.py times the model's step and compares; command.py
is the subcommand. result.py holds the plain results (no torch), which the reporters read.
"""
