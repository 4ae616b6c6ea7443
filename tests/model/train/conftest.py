"""Fixtures of the training-step tests."""

import pytest
import torch


@pytest.fixture
def two_threads():
    """ATen set to two threads for the test (a parallel kernel possible), the count before given back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)
