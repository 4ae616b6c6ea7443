"""The module paths the memory model gives each op (memory._module_paths): each walked module's
`_call_impl` wrapped on the instance, or two global hooks where a hook would run between ours and the
module's; the same paths either way."""

import pytest
import torch
import torch.nn as nn
from torch.nn.modules import module as torch_module

from archlint.model.train import memory


class _Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x)) + x


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.relu = nn.ReLU()  # called twice
        self.inner = _Inner()
        self.direct = nn.Linear(8, 8)  # its forward called directly: no path pushed
        self.head = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x):
        x = self.relu(self.a(x))
        x = self.inner(x)
        x = self.relu(self.direct.forward(x))
        x = nn.Identity()(x)  # made in the forward: not walked, no path
        return self.head(x) * 2


def _run(model: nn.Module, wrapped: bool, check=None) -> memory._Tracker:
    meta = memory.to_meta(model)
    walk = memory._walk(meta, train=True)
    tracker = memory._Tracker()
    handles = memory._module_paths(walk.paths, tracker, walk.modules if wrapped else None)
    try:
        if check is not None:
            check(walk)
        x = torch.empty(3, 4, device="meta")
        with memory._Watch(tracker, None):
            loss = meta(x).sum()
            loss.backward()
    finally:
        for h in handles:
            h.remove()
    assert tracker.modules == []
    assert not any("_call_impl" in vars(m) for m in walk.modules)
    return tracker


def _paths(tracker: memory._Tracker) -> tuple:
    return (
        tracker.op_names,
        tracker.op_phase,
        tracker.op_module,
        [(r.nbytes, r.born, r.died, r.op, r.phase, r.module) for r in tracker.records],
    )


def _hooks() -> int:
    return len(torch_module._global_forward_pre_hooks) + len(torch_module._global_forward_hooks)


def test_the_wrappers_give_the_paths_the_global_hooks_gave():
    torch.manual_seed(0)
    model = _Net()
    before = _hooks()

    def no_global_hooks(walk):
        assert _hooks() == before  # the wrappers alone: every module call keeps _call_impl's fast path
        assert all("_call_impl" in vars(m) for m in walk.modules)

    wrapped = _run(model, True, no_global_hooks)
    hooked = _run(model, False, lambda walk: (_hooks() == before + 2) or pytest.fail("no global hooks"))
    assert _paths(wrapped) == _paths(hooked)
    modules = set(wrapped.op_module)
    assert {"a", "relu", "inner.fc", "inner.act", "inner", "head.0", "head.1", "<model>"} <= modules
    assert "direct" not in modules  # a direct .forward call, as under the hooks


def test_a_modules_own_forward_hook_keeps_the_global_hooks():
    # the module's own hook runs after the global post hook (its op is the parent's): a wrapper would
    # pop after it, so the step keeps the global hooks
    torch.manual_seed(0)
    model = _Net()
    model.inner.register_forward_hook(lambda module, args, out: out * 3)
    before = _hooks()

    def global_hooks(walk):
        assert _hooks() == before + 2
        assert not any("_call_impl" in vars(m) for m in walk.modules)

    tracker = _run(model, True, global_hooks)
    muls = [m for name, m in zip(tracker.op_names, tracker.op_module) if name == "mul"]
    assert muls[0] == "<model>"  # the hook's `out * 3`, in the parent's path


def test_an_exception_pops_the_paths_and_the_wrappers_go():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(Boom()))
    meta = memory.to_meta(model)
    walk = memory._walk(meta, train=True)
    tracker = memory._Tracker()
    x = torch.empty(1, 2, device="meta")
    handles = memory._module_paths(walk.paths, tracker, walk.modules)
    with pytest.raises(ValueError), memory._Watch(tracker, None):
        meta(x)
    assert tracker.modules == []
    assert tracker.op_module and set(tracker.op_module) == {"0"}  # the Linear's ops, then Boom's raise
    for h in handles:
        h.remove()
    assert not any("_call_impl" in vars(m) for m in walk.modules)
    assert not any("_call_impl" in vars(m) for m in model.modules())
