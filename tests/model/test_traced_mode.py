"""costed.traced_mode puts the model in the capture's mode and every module's own flag back after;
it sets the flags itself where no module has its own train() (issue 45), and calls the model's
train() where one does (a model that keeps its norms frozen decides for them)."""

from __future__ import annotations

from torch import nn

from archlint.model.costed import traced_mode


class _FrozenNorms(nn.Sequential):
    def train(self, mode: bool = True):
        super().train(mode)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()
        return self


def test_every_flag_is_the_modes_inside_and_its_own_after():
    model = nn.Sequential(nn.Conv2d(1, 1, 1), nn.Sequential(nn.BatchNorm2d(1), nn.ReLU())).eval()
    model[1][1].train()  # one module in its own mode
    before = [m.training for m in model.modules()]
    with traced_mode(model, "train"):
        assert all(m.training is True for m in model.modules())
    assert [m.training for m in model.modules()] == before
    with traced_mode(model, "eval"):
        assert all(m.training is False for m in model.modules())
    assert [m.training for m in model.modules()] == before


def test_a_models_own_train_decides():
    model = _FrozenNorms(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1)).eval()
    with traced_mode(model, "train"):
        assert model.training and model[0].training and not model[1].training
    assert not any(m.training for m in model.modules())
