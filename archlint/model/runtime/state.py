"""The process state the user's model code may change, put back after it ran.

`archlint.analyze` runs the user's constructor and forward inside the user's own process (a
notebook, a test): afterwards the random generators (torch's, Python's, NumPy's), grad mode, the
default dtype and the working directory are what they were, whatever the model's code did to them
(`torch.manual_seed` in `__init__`, `torch.set_grad_enabled(False)` or `os.chdir` in a
constructor). Module attributes, parameters and buffers are `sandbox.preserved`'s job.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys

import torch


def _numpy_random():
    # only if something imported it: saving never imports NumPy (one the model imports is new anyway)
    numpy = sys.modules.get("numpy")
    return getattr(numpy, "random", None) if numpy is not None else None


@contextlib.contextmanager
def global_state():
    torch_rng = torch.random.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    cuda_later = cuda_rng is None and torch.cuda.is_available()  # CUDA not started yet: it may start in the block
    python_rng = random.getstate()
    numpy_random = _numpy_random()
    numpy_rng = numpy_random.get_state() if numpy_random is not None else None
    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    try:
        cwd = os.getcwd()
    except OSError:  # archlint was started in a folder since removed: nothing to go back to
        cwd = None
    try:
        yield
    finally:
        torch.random.set_rng_state(torch_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        elif cuda_later and torch.cuda.is_initialized():
            # started in the block (inputs, timing on the GPU): each generator back at its first draw,
            # from the seed it started with (the user's torch.manual_seed, queued until CUDA starts)
            for generator in torch.cuda.default_generators:
                generator.manual_seed(generator.initial_seed())
        random.setstate(python_rng)
        if numpy_rng is not None:
            numpy_random.set_state(numpy_rng)
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        if cwd is not None and _cwd() != cwd:
            os.chdir(cwd)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None
