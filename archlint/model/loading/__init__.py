"""Turning a target (`PATH.py:NAME`, `hf:NAME`) into a model and its example inputs."""
