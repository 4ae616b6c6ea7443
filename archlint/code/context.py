"""What the rest of the project says about one file: the answer of the project join (project.py),
handed to the checks as `facts.project`.

A context is a small JSON object, so that a file's findings are a pure function of (its text, its
context) and can be cached under both. It only holds what the file can use; an empty context is
the common case (a library module nobody trains with) and means "lint the file alone".

    names       local dotted name → what it is in another module (or this one):
                  {"loader": [pin, workers, where]}  a function that builds and returns a DataLoader
                                                     (or an object that iterates one);
                                                     pin/workers: "true" | "false" | "missing" |
                                                     "unknown" | an int (workers)
                  {"yields": i}     a generator that iterates its i-th argument (a loader wrapper),
                                    or a CUDA-stream prefetcher class built on it (i = 0)
                  {"batch": 1}      a function that draws a batch from a loader (`get_batch()`)
                  {"backward": 1}   a function that runs a backward pass (a training step)
                  {"step": 1}       ... once per call, outside any loop of its own (`agent.learn(batch)`)
                  {"cuda": 1}       a CUDA device, or a function that returns one
                  {"dataloader": 1} a DataLoader subclass that passes its arguments through
                  {"plain": 1}      a function that returns no tensor (literals only)
    cuda        a module that calls this one chooses CUDA (devices arrive as parameters)
    conv        the models this entry point imports from the project have convolutions
    varying     a project module this entry point imports sees input sizes that vary per batch (CTC loss,
                torchvision detection models, aspect-ratio grouping)
    trains      this file's __main__ block runs a training loop that another module holds
    cudnn       a project function this file calls sets cudnn.benchmark / deterministic
    amp         a project module this file imports (up to three deep) chooses a precision
    per_step    function qualname → [[tensor parameter names], "file:line" of a call site]: called
                once per training step from a training loop (here or in another module)
    feeds_cuda  function qualnames whose DataLoader is used by a module that runs on CUDA
    pinned      function qualname → {parameter: pin}: loaders callers pass in, pinned or not
    batches     function qualname → {parameter: pin}: batches a loop hands in (`model.parse_batch(batch)`),
                with the pin of the loader they come from
"""

from __future__ import annotations

# Imported libraries that are never part of the project being linted: their names are not looked up
# on disk. A library name that projects also give their own modules (`datasets`: RAFT's and many
# others' datasets.py beside train.py) is not here: the import is resolved to the project's file when
# there is one, and to nothing (the library) otherwise.
LIBRARIES = frozenset({"torch", "torchvision", "numpy", "np", "timm", "transformers", "os", "sys", "math",
                        "time", "json", "argparse", "logging", "random", "datetime", "pathlib", "tqdm",
                        "accelerate", "diffusers", "PIL", "cv2", "wandb", "yaml", "collections", "functools",
                       "typing", "re", "copy", "itertools", "warnings", "contextlib", "dataclasses", "abc",
                       "torchaudio", "torchtext", "scipy", "sklearn", "pandas", "matplotlib",
                       "huggingface_hub", "lightning", "pytorch_lightning", "deepspeed", "apex", "einops"})


class ProjectContext:
    __slots__ = ("data", "names", "cuda", "conv", "varying", "trains", "cudnn", "amp", "per_step", "feeds_cuda", "pinned",
                 "batches")

    def __init__(self, data: dict | None = None) -> None:
        data = data or {}
        self.data = data
        self.names: dict[str, dict] = data.get("names", {})
        self.cuda: bool = bool(data.get("cuda"))
        self.conv: bool = bool(data.get("conv"))
        self.varying: bool = bool(data.get("varying"))
        self.trains: bool = bool(data.get("trains"))
        self.cudnn: bool = bool(data.get("cudnn"))
        self.amp: bool = bool(data.get("amp"))
        self.per_step: dict[str, list] = data.get("per_step", {})
        self.feeds_cuda: frozenset[str] = frozenset(data.get("feeds_cuda", ()))
        self.pinned: dict[str, dict[str, str]] = data.get("pinned", {})
        self.batches: dict[str, dict[str, str]] = data.get("batches", {})

    def name(self, dotted_name: str | None) -> dict:
        return self.names.get(dotted_name, {}) if dotted_name else {}

    def __bool__(self) -> bool:
        return bool(self.data)


EMPTY = ProjectContext()
