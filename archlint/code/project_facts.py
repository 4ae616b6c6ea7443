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
from typing import NamedTuple, TypedDict

# Imported libraries that are never part of the project being linted: their names are not looked up
# on disk. A library name that projects also give their own modules (`datasets`: RAFT's and many
# others' datasets.py beside train.py) is not here: the import is resolved to the project's file when
# there is one, and to nothing (the library) otherwise.
LIBRARIES = frozenset(
    {
        "torch",
        "torchvision",
        "numpy",
        "np",
        "timm",
        "transformers",
        "os",
        "sys",
        "math",
        "time",
        "json",
        "argparse",
        "logging",
        "random",
        "datetime",
        "pathlib",
        "tqdm",
        "accelerate",
        "diffusers",
        "PIL",
        "cv2",
        "wandb",
        "yaml",
        "collections",
        "functools",
        "typing",
        "re",
        "copy",
        "itertools",
        "warnings",
        "contextlib",
        "dataclasses",
        "abc",
        "torchaudio",
        "torchtext",
        "scipy",
        "sklearn",
        "pandas",
        "matplotlib",
        "huggingface_hub",
        "lightning",
        "pytorch_lightning",
        "deepspeed",
        "apex",
        "einops",
    }
)


# The entries of a file's facts: named records, written to JSON as lists (NamedTuple) and read
# back by FileFacts.from_json. A new field goes at the end, with a default, and the cache's
# PROJECT_FILE version is bumped (cache.py): an old cache is then ignored, never misread.


class ImportFact(NamedTuple):
    """`from .data import build as b` → ("b", "data", "build", 1); `import util.misc as misc` →
    ("misc", "util.misc", None, 0); a star import has local "*" and name "*"."""

    local: str  # the name bound in the importing file
    module: str  # the module, as written (relative to `level` packages up)
    name: str | None  # the name imported from it; None for `import module`
    level: int  # leading dots of a relative import


class PinRef(NamedTuple):
    """A loader's pin that only the project join can tell: one a project factory builds
    (kind "from", `name` the factory), or the one a function's callers pass for its parameter
    (kind "param", `name` the function's qualname, `param` the parameter)."""

    kind: str  # "from" | "param"
    name: str
    param: str | None = None


Pin = str | PinRef  # "true" | "false" | "missing" | "unknown", or a reference


class OnParam(NamedTuple):
    """A method called on a parameter (`log_writer.update(...)`): the enclosing function and the
    parameter, whose classes come from the project's call sites (FileFacts.arg_classes)."""

    function: str
    param: str


class Step(NamedTuple):
    """A call made once per training step."""

    callee: str  # the name to resolve in the project
    line: int
    args: list  # which arguments carry tensors: positions, keywords, "**"
    local: str | None  # the qualname of the function it calls in this file, when known
    on_param: OnParam | None = None  # a method of a parameter's object (then `local` is None)


class LoopStep(NamedTuple):
    """A call of one of the file's loops (numbered in facts.loops order), taken as a step by the
    join under a condition (FileFacts.maybe_steps, rate_steps)."""

    loop: int
    step: Step


class LoaderArg(NamedTuple):
    """A loader passed to a project function."""

    callee: str
    arg: int | str  # position or keyword
    pin: Pin


class BatchArg(NamedTuple):
    """A batch a loop hands to a project function (`model.parse_batch(batch)`)."""

    callee: str
    arg: int | str
    pin: Pin  # of the loop's loader
    local: str | None  # qualname in this file, when known
    on_param: OnParam | None = None


class ArgClass(NamedTuple):
    """A project object passed to a project call (`train(..., log_writer=log_writer)`)."""

    callee: str
    arg: int | str
    cls: str  # the project class the object is built from


class SysPathEntry(NamedTuple):
    """A folder a file adds to sys.path (syspath.py), relative to the file's folder."""

    where: str  # "front" | "middle" | "back"
    folder: str


class LoaderFact(NamedTuple):
    """A function that builds and returns a DataLoader (or a loader-wrapping object)."""

    pin: str
    workers: int | str  # an int, or "missing" | "unknown"
    line: int
    holder: str  # the qualname of the function the DataLoader call is in


class InnerCall(NamedTuple):
    """An unconditional project call of a step function, with the tensors it receives (summary._inner_calls)."""

    callee: str
    line: int
    specs: list  # [[argument, "*" | [parameters it derives from]]]
    local: str | None


class PerStep(NamedTuple):
    """A function called once per training step (ProjectContext.per_step): its tensor parameters
    and a "file:line" of a call site."""

    tensors: list[str]
    site: str


class FunctionFacts(TypedDict, total=False):
    """What other files may learn about one function (a key is present only when true)."""

    params: list[str]  # its positional parameters (always present)
    kwargs: str  # the name of its **kwargs
    loader: LoaderFact  # it builds and returns a DataLoader (or a loader-wrapping object)
    yields: int  # a generator that iterates its i-th argument (a loader wrapper)
    batch: int  # 1: draws a batch from a loader (`next(loader)`)
    sync: int  # 1: may wait for the GPU (`.item()`, print, a test of a tensor's value)
    cuda: int  # 1: returns a CUDA device
    calls: list[InnerCall]  # its unconditional project calls that pass tensors (summary._inner_calls)
    backward: int  # 1: runs a backward pass
    step: int  # 1: one backward per call, outside any loop of its own (`agent.learn(batch)`)
    plain: int  # 1: returns no tensor (literals only)
    cudnn: int  # 1: sets cudnn.benchmark / deterministic


@dataclass
class FileFacts:
    """One file's facts that other files can use (its entries are the records above)."""

    imports: list[ImportFact] = field(default_factory=list)
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
    steps: list[Step] = field(default_factory=list)  # calls made once per training step
    maybe_steps: list[LoopStep] = field(default_factory=list)  # of loops that train if one is a project step
    rate_steps: list[LoopStep] = field(default_factory=list)  # as steps, under `if T % k == 0:` (dataflow.rate_test)
    loader_args: list[LoaderArg] = field(default_factory=list)  # loaders passed to project calls
    batch_args: list[BatchArg] = field(default_factory=list)  # batches handed to project calls
    arg_classes: list[ArgClass] = field(default_factory=list)  # project objects passed to project calls
    sys_path: list[SysPathEntry] = field(default_factory=list)  # folders it adds to sys.path

    def to_json(self) -> dict:
        """JSON-able as it is: the records are tuples, written as lists."""
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict | None) -> FileFacts | None:
        """The facts a JSON object holds (None for None), as records; TypeError (or ValueError)
        for one of another shape."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise TypeError(f"project facts must be a JSON object, not {type(data).__name__}")
        facts = cls(**data)
        facts.imports = [ImportFact(*e) for e in facts.imports]
        facts.steps = [_step(e) for e in facts.steps]
        facts.maybe_steps = [LoopStep(n, _step(e)) for n, e in facts.maybe_steps]
        facts.rate_steps = [LoopStep(n, _step(e)) for n, e in facts.rate_steps]
        facts.loader_args = [LoaderArg(callee, arg, _pin(pin)) for callee, arg, pin in facts.loader_args]
        facts.batch_args = [
            BatchArg(callee, arg, _pin(pin), local, _on_param(on)) for callee, arg, pin, local, on in facts.batch_args
        ]
        facts.arg_classes = [ArgClass(*e) for e in facts.arg_classes]
        facts.sys_path = [SysPathEntry(*e) for e in facts.sys_path]
        facts.defs = {qual: _function(dict(info)) for qual, info in facts.defs.items()}  # JSON objects here
        return facts


def _on_param(data) -> OnParam | None:
    return None if data is None else OnParam(*data)


def _step(data) -> Step:
    callee, line, args, local, on_param = data
    return Step(callee, line, args, local, _on_param(on_param))


def _pin(data) -> Pin:
    return data if isinstance(data, str) else PinRef(*data)


def _function(info: dict) -> FunctionFacts:
    out: FunctionFacts = dict(info)  # type: ignore[assignment]
    if "loader" in out:
        out["loader"] = LoaderFact(*out["loader"])
    if "calls" in out:
        out["calls"] = [InnerCall(*c) for c in out["calls"]]
    return out


class NameLoader(NamedTuple):
    """A project function that builds and returns a DataLoader, as the file calling it sees it."""

    pin: str | int  # "true" | "false" | "missing" | "unknown"
    workers: int | str
    site: str  # "file:line" of the DataLoader call


class NameFacts(TypedDict, total=False):
    """What a name a file calls is in another module (or this one); a key is present only when true."""

    loader: NameLoader  # builds and returns a DataLoader (or an object that iterates one)
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
    # function qualname → its tensor parameters and a call site: called once per training step from
    # a training loop (here or in another module)
    per_step: dict[str, PerStep] = field(default_factory=dict)
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
