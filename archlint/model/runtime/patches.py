"""torch as it was before a target was imported, put back after it.

A model file may patch torch when it is imported (`F.scaled_dot_product_attention = mine`,
`F.conv2d = ...`, `nn.Module.__call__ = ...`, `torch.Tensor.foo = ...`): in one run that analyzes
several targets (`--models`, several targets, the pre-commit hook, `archlint.analyze` in a
notebook) every later target would run on the patched torch, and get other findings and numbers
depending on the order. `as_found` snapshots the attributes of torch's public namespaces before a
target and puts back each one that was rebound, deleted or added; the target's result says so
in a note (its model monkeypatches torch: worth knowing).

What is snapshotted (OWNERS, and every nn.Module class torch.nn exports: `nn.Linear.forward = ...`):
a copy of each one's `__dict__`, about 3,500 names, 0.1 ms to take and 0.1 ms to compare. An
attribute added that is a module is left (an `import torch._dynamo` names the submodule on its
package: that is importing, not patching). torch's one-time set-ups are done before the first
snapshot (importing torch._dynamo, which every capture does anyway, wraps `torch.manual_seed`); what
archlint's own runs change later (torch.compile hooks `nn.Module.__init__`) is put back too, and
only what had changed by the end of the target's capture is named in its note.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
import torch._dynamo  # noqa: F401  its import wraps torch.manual_seed once: torch's own set-up, before any snapshot
import torch.nn.functional as F
from torch import nn

# the namespaces a model file reaches torch through: functions, tensor methods, module machinery
OWNERS: tuple[Any, ...] = (
    torch,
    F,
    torch.Tensor,
    nn.Module,
    nn,
    nn.init,
    nn.Parameter,
    torch.linalg,
    torch.fft,
    torch.special,
    torch.autograd,
    torch.autograd.Function,
    torch.random,
    torch._C._nn,
    nn.modules.module,
)


def owners() -> list[Any]:
    module_classes = [c for c in vars(nn).values() if inspect.isclass(c) and issubclass(c, nn.Module)]
    return list(dict.fromkeys(OWNERS + tuple(module_classes)))


def _name(owner: Any) -> str:
    """As a user writes it: torch.nn.functional, torch.Tensor, torch.nn.Linear."""
    if isinstance(owner, ModuleType):
        return owner.__name__
    if owner is torch.Tensor:
        return "torch.Tensor"
    if getattr(nn, owner.__qualname__, None) is owner:
        return f"torch.nn.{owner.__qualname__}"
    return f"{owner.__module__}.{owner.__qualname__}"


_MISSING = object()


@dataclass
class Restored:
    """What a target changed in torch: `by_model`, the names its own code patched (seen by `mark`,
    after its import, build and capture); `names`, everything put back at the end (with what
    archlint's own runs changed, such as torch.compile's hooks on nn.Module)."""

    saved: list[tuple[Any, dict[str, Any]]]
    by_model: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def note(self) -> str | None:
        if not self.by_model:
            return None
        shown = ", ".join(self.by_model[:6]) + (f" and {len(self.by_model) - 6} more" if len(self.by_model) > 6 else "")
        return (
            f"the model's code patches torch ({shown}): analyzed with the patch, then torch was put back "
            "as it was, so other targets of the run do not see it"
        )


def snapshot() -> list[tuple[Any, dict[str, Any]]]:
    return [(owner, dict(vars(owner))) for owner in owners()]


def _changes(saved: list[tuple[Any, dict[str, Any]]]) -> list[tuple[Any, str]]:
    """(owner, name) of every attribute rebound, deleted or added since the snapshot."""
    changes = []
    for owner, was in saved:
        now = vars(owner)
        for key, value in list(now.items()):
            if was.get(key, _MISSING) is not value and not (key not in was and isinstance(value, ModuleType)):
                changes.append((owner, key))  # (an added submodule is an import meanwhile: its package names it)
        changes += [(owner, key) for key in was if key not in now]
    return changes


def restore(saved: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """Put every rebound, deleted or added attribute back; the names of those that were changed."""
    was = {id(owner): attributes for owner, attributes in saved}
    changes = _changes(saved)
    for owner, key in changes:
        if key in was[id(owner)]:
            setattr(owner, key, was[id(owner)][key])
        else:
            delattr(owner, key)
    return sorted({f"{_name(owner)}.{key}" for owner, key in changes})


_ACTIVE: list[Restored] = []  # the snapshots of the targets being analyzed, innermost last


def mark() -> None:
    """Called once the target's code has been imported, built and run (its capture): what it
    patched in torch so far is its own doing, said in its note."""
    if _ACTIVE:
        _ACTIVE[-1].by_model = sorted({f"{_name(owner)}.{key}" for owner, key in _changes(_ACTIVE[-1].saved)})


@contextlib.contextmanager
def as_found():
    """The block may patch torch; afterwards torch is as it was, and the Restored says what changed."""
    restored = Restored(snapshot())
    _ACTIVE.append(restored)
    try:
        yield restored
    finally:
        _ACTIVE.remove(restored)
        restored.names = restore(restored.saved)
