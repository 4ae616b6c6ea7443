"""Which Python frames of a trace are the user's: the library-frame filter and call sites.

A `with_stack=True` trace names each Python call `file.py(LINE): function` (LINE: where the
function begins) and says in `args.CallFrom` (`file.py:LINE`) the line that called it. Paths
under `sys.path` are written relative to it, so the standard library shows as
`multiprocessing/connection.py` and installed packages as `torch/nn/modules/linear.py`: a frame is
a library's when its path is in site-packages, under a Python install, a built-in or frozen
module, or its first component is a standard-library module (sys.stdlib_module_names) or a
well-known ML package. The call site of an event is the innermost call made from a user's line
around it: for `.item()` the line that called it, not the `def` of the function it is in.
"""

from __future__ import annotations

import functools
import re
import sys

_LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|/lib/python\d|<built-in|<frozen|<string>|<method|<lambda>"
    r"|^<|/torch/|/usr/lib/"
)
# Packages a training script imports whose frames are never the user's code (the trace writes
# them relative to sys.path, like the standard library).
_PACKAGES = frozenset(
    (
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "torchrec",
        "torchdata",
        "torchmetrics",
        "fbgemm_gpu",
        "triton",
        "transformers",
        "accelerate",
        "datasets",
        "tokenizers",
        "huggingface_hub",
        "safetensors",
        "peft",
        "trl",
        "diffusers",
        "timm",
        "lightning",
        "pytorch_lightning",
        "lightning_fabric",
        "deepspeed",
        "fairscale",
        "apex",
        "megatron",
        "composer",
        "xformers",
        "flash_attn",
        "bitsandbytes",
        "einops",
        "numpy",
        "scipy",
        "sklearn",
        "pandas",
        "PIL",
        "cv2",
        "albumentations",
        "tqdm",
        "hydra",
        "omegaconf",
        "wandb",
        "tensorboard",
        "mlflow",
        "ray",
        "functorch",
        "pkg_resources",
        "setuptools",
        "typing_extensions",
        "packaging",
        "jinja2",
        "yaml",
        "google",
        "absl",
        "jax",
    )
)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}


@functools.lru_cache(maxsize=1 << 16)  # a with_stack trace repeats the same few thousand frames
def is_library(frame: str) -> bool:
    """Whether a frame name (`path.py(12): fn`) or a CallFrom (`path.py:12`) is library code."""
    if _LIBRARY_PATH.search(frame):
        return True
    path = frame.split("(", 1)[0].split(":", 1)[0]
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        return False  # an absolute path outside any Python install: the user's
    top = re.split(r"[/\\]", path, maxsplit=1)[0]
    module = top[:-3] if top.endswith(".py") else top
    return module in _STDLIB or module in _PACKAGES


_CALL_FROM = re.compile(r"^(?P<file>.+?\.py):(?P<line>\d+)$")


def call_site(value: object) -> str | None:
    """The user's `file.py:LINE` a Python call was made from, or None (not said, or a library's)."""
    return _user_call_site(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=1 << 16)
def _user_call_site(value: str) -> str | None:
    return value if _CALL_FROM.match(value) and not is_library(value) else None


def parse_call_site(text: str) -> tuple[str, int] | None:
    m = _CALL_FROM.match(text)
    return (m["file"], int(m["line"])) if m else None
