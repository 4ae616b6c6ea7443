"""Where modules were created in the user's code (archlint.model.loading.created)."""

from __future__ import annotations

import inspect

import torchvision
from torch import nn

from archlint.model.loading.created import recording, site_of


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)  # LINE_CONV


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])  # LINE_BLOCKS
        self.backbone = torchvision.models.resnet18()  # LINE_BACKBONE


class Unhashable(nn.Module):
    def __eq__(self, other):  # defining __eq__ drops __hash__
        return self is other


def _line(marker: str) -> int:
    lines, start = inspect.getsourcelines(inspect.getmodule(Net))
    return next(i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}"))


def test_sites_are_the_users_lines():
    with recording():
        net = Net()
    assert site_of(net.blocks[0].conv) == (__file__, _line("LINE_CONV"))
    assert site_of(net.blocks[1]) == (__file__, _line("LINE_BLOCKS"))
    # a library model's submodules: the user's builder call
    assert site_of(net.backbone.layer1[0].conv1) == (__file__, _line("LINE_BACKBONE"))


def test_outside_recording_nothing_is_recorded_and_init_is_restored():
    init = nn.Module.__init__
    with recording():
        assert nn.Module.__init__ is not init
    assert nn.Module.__init__ is init
    assert site_of(Block().conv) is None


def test_unhashable_module_still_builds():
    with recording():
        module = Unhashable()
    assert isinstance(module, nn.Module) and site_of(nn.Conv2d(1, 1, 1)) is None
