"""The facts the project join exchanges, typed and defined here only:

- `FileFacts`: what one file tells the rest of the project (summary.py extracts it from the file,
  or project.light from a file that never mentions torch); JSON in the cache and between processes.
- `ProjectContext`: what the rest of the project says about one file (project.py joins it from
  every file's FileFacts), handed to the checks as `facts.project`.

A new cross-file fact is a field here, its producer (summary.py) and its consumer (project.py for
a FileFacts field, a check for a ProjectContext field).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TypedDict

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


class FunctionFacts(TypedDict, total=False):
    """What other files may learn about one function (a key is present only when true)."""

    params: list[str]  # its positional parameters (always present)
    kwargs: str  # the name of its **kwargs
    loader: list  # [pin, workers, line, holder]: it builds and returns a DataLoader (or a loader-wrapping object)
    yields: int  # a generator that iterates its i-th argument (a loader wrapper)
    batch: int  # 1: draws a batch from a loader (`next(loader)`)
    sync: int  # 1: may wait for the GPU (`.item()`, print, a test of a tensor's value)
    cuda: int  # 1: returns a CUDA device
    calls: list  # its unconditional project calls that pass tensors (summary._inner_calls)
    backward: int  # 1: runs a backward pass
    step: int  # 1: one backward per call, outside any loop of its own (`agent.learn(batch)`)
    plain: int  # 1: returns no tensor (literals only)
    cudnn: int  # 1: sets cudnn.benchmark / deterministic


@dataclass
class FileFacts:
    """One file's facts that other files can use.

    imports   [[local, module, name, level]]: `from .data import build as b` → ["b", "data", "build", 1];
              `import util.misc as misc` → ["misc", "util.misc", null, 0]; a star import has local "*"
    steps     [[callee, line, tensor args, local qualname]]: calls made once per training step; a method
              called on a parameter adds [enclosing qualname, parameter] (its class comes from arg_classes)
    maybe_steps [[loop number, *steps entry]]: calls of loops that train if one of them is a project step
    loader_args [[callee, argument (index or keyword), pin]]: a loader of this file (or ["from", factory]:
              of a project factory it calls; ["param", function, parameter]: the one its callers pass) passed to a call
    batch_args  [[callee, argument, pin of the loop's loader, local qualname]]: a batch handed to a call
    arg_classes [[callee, argument (index or keyword), class]]: a project object passed to a project call
    """

    imports: list[list] = field(default_factory=list)
    cuda: bool = False  # the file itself runs on a GPU (names CUDA, torch.accelerator or accelerate)
    conv: bool = False  # it builds convolutions (nn.Conv*, F.conv*, torchvision/timm models)
    conv_defs: list[str] = field(default_factory=list)  # where: top-level defs/classes, "<module>" (cudnn.conv_defs)
    varying: bool = False  # its input sizes change per batch (CTC loss, torchvision detection, aspect-ratio groups)
    cudnn: bool = False  # it sets cudnn.benchmark / deterministic
    amp: bool = False  # it chooses a precision (autocast, a scaler, half/bf16)
    entry: bool = False  # it runs a training or evaluation loop (a candidate entry point)
    trains: bool = False  # it runs a training loop
    main: bool = False  # it has an `if __name__ == "__main__":` block
    light: bool = False  # read by project.light (imports and names only) from a file that never mentions torch
    self_calls: dict[str, str] = field(default_factory=dict)  # `self.method` called → its qualname
    cuda_names: list[str] = field(default_factory=list)  # module-level names bound to a CUDA device
    defs: dict[str, FunctionFacts] = field(default_factory=dict)  # function qualname → its facts
    classes: list[str] = field(default_factory=list)  # class qualnames
    prefetchers: list[str] = field(default_factory=list)  # CUDA-stream prefetcher classes built on a loader
    loader_classes: list[str] = field(default_factory=list)  # DataLoader subclasses passing its arguments through
    uses: list[str] = field(default_factory=list)  # dotted names it calls that may be project functions
    aliases: dict[str, str] = field(default_factory=dict)  # a called name → the project name it stands for
    steps: list[list] = field(default_factory=list)
    maybe_steps: list[list] = field(default_factory=list)
    rate_steps: list[list] = field(default_factory=list)  # as steps, under `if T % k == 0:` (dataflow.rate_test)
    loader_args: list[list] = field(default_factory=list)
    batch_args: list[list] = field(default_factory=list)
    arg_classes: list[list] = field(default_factory=list)
    # [[where, folder]]: folders it adds to sys.path, relative to its own ("front"/"middle"/"back", syspath.py)
    sys_path: list[list] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict | None) -> FileFacts | None:
        """The facts a JSON object holds (None for None); TypeError for one of another shape."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise TypeError(f"project facts must be a JSON object, not {type(data).__name__}")
        return cls(**data)


class NameFacts(TypedDict, total=False):
    """What a name a file calls is in another module (or this one); a key is present only when true."""

    loader: list  # [pin, workers, "file:line"]: builds and returns a DataLoader (or an object that iterates
    # one); pin/workers: "true" | "false" | "missing" | "unknown" | an int (workers)
    yields: int  # a generator that iterates its i-th argument (a loader wrapper), or a CUDA-stream
    # prefetcher class built on it (i = 0)
    batch: int  # 1: draws a batch from a loader (`get_batch()`)
    backward: int  # 1: runs a backward pass (a training step)
    step: int  # 1: ... once per call, outside any loop of its own (`agent.learn(batch)`)
    cuda: int  # 1: a CUDA device, or a function that returns one
    dataloader: int  # 1: a DataLoader subclass that passes its arguments through
    plain: int  # 1: returns no tensor (literals only)
    amp: int  # 1: a training step in a module that chooses a precision


@dataclass
class ProjectContext:
    """What the rest of the project says about one file. A file's findings are a pure function of
    (its text, its context), cached under both (`to_json`); an empty context is the common case (a
    library module nobody trains with) and means "lint the file alone"."""

    names: dict[str, NameFacts] = field(default_factory=dict)  # local dotted name → what it is
    cuda: bool = False  # a module that calls this one chooses CUDA (devices arrive as parameters)
    conv: bool = False  # the models this entry point imports from the project have convolutions
    varying: bool = False  # a project module this entry point imports sees input sizes that vary per batch
    trains: bool = False  # this file's __main__ block runs a training loop that another module holds
    cudnn: bool = False  # a project function this file calls sets cudnn.benchmark / deterministic
    amp: bool = False  # a project module this file imports (up to three deep) chooses a precision
    driver: bool = False  # a torch-free file that runs project torch code: read in full
    # function qualname → [[tensor parameter names], "file:line" of a call site]: called once per
    # training step from a training loop (here or in another module)
    per_step: dict[str, list] = field(default_factory=dict)
    feeds_cuda: list[str] = field(default_factory=list)  # functions whose DataLoader a CUDA module uses
    pinned: dict[str, dict[str, str]] = field(default_factory=dict)  # function → {parameter: pin of the loaders passed}
    # function → {parameter: pin}: batches a loop hands in (`model.parse_batch(batch)`), with the pin
    # of the loader they come from
    batches: dict[str, dict[str, str]] = field(default_factory=dict)

    def name(self, dotted_name: str | None) -> NameFacts:
        return self.names.get(dotted_name, {}) if dotted_name else {}

    def to_json(self) -> dict:
        """The fields that say something (flags as 1), for the cache key of findings in context."""
        return {f.name: 1 if value is True else value for f in fields(self) if (value := getattr(self, f.name))}

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))


EMPTY = ProjectContext()
