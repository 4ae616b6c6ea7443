"""detectron2's plain_train_net-style step: an `assert` on a tensor and a dict comprehension of
`.item()` run every step (AL401); the device comes from the library's config (MODEL.DEVICE "cuda"),
or a project config read as `cfg.MODEL.DEVICE`."""

from __future__ import annotations

from archlint.code import lint
from archlint.code.engine import lint_text
from archlint.config import Settings

STEP = """import torch
{IMPORT}


def do_train(cfg, model, optimizer, data_loader, storage):
    model.to(torch.device({DEVICE}))
    for data, iteration in zip(data_loader, range(cfg.SOLVER.MAX_ITER)):
        loss_dict = model(data)
        losses = sum(loss_dict.values())
        {CHECK}
        scalars = {READ}
        storage.put_scalars(**scalars)
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
"""

SLOW = {
    "{CHECK}": "assert torch.isfinite(losses).all(), loss_dict",
    "{READ}": "{k: v.item() for k, v in reduce_dict(loss_dict).items()}",
}
FAST = {
    "{CHECK}": "assert len(loss_dict) > 0, loss_dict",  # no tensor value read
    "{READ}": "{k: v.detach() for k, v in reduce_dict(loss_dict).items()}",
}


def _al401(parts: dict, imports: str = "from detectron2.utils.comm import reduce_dict", device: str = "cfg.DEVICE"):
    text = STEP.replace("{IMPORT}", imports).replace("{DEVICE}", device)
    for key, value in parts.items():
        text = text.replace(key, value)
    return [d.line for d in lint_text(text, "plain_train_net.py") if d.code == "AL401"]


def test_assert_and_item_comprehension_are_per_step_syncs():
    assert _al401(SLOW) == [10, 11]


def test_negative_twin_reads_no_tensor_value():
    assert _al401(FAST) == []


def test_device_from_a_config():
    # a project config attribute spelled in capitals (detectron-style yacs config)
    assert _al401(SLOW, "from utils import reduce_dict", "cfg.MODEL.DEVICE") == [10, 11]
    # nothing says GPU: no detectron2, no device from a config → not linted as a CUDA loop
    assert _al401(SLOW, "from utils import reduce_dict", '"cpu"') == []


HELPER = """import torch


class Trainer:
    def run(self, model, loader, optimizer):
        model.cuda()
        for data in loader:
            losses = model(data)
            self._detect_anomaly(losses, data)
            optimizer.zero_grad()
            losses.backward()
            optimizer.step()

    def _detect_anomaly(self, losses, data):
        if {TEST}:
            raise FloatingPointError("loss became infinite or NaN")
"""


def _project_al401(tmp_path, text: str) -> list[int]:
    (tmp_path / "trainer.py").write_text(text)
    diagnostics = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False, select=["AL401"])).diagnostics
    return [d.line for d in diagnostics]


def test_if_on_a_tensor_in_a_per_step_helper(tmp_path):
    assert _project_al401(tmp_path, HELPER.replace("{TEST}", "not torch.isfinite(losses).all()")) == [15]
    # a presence test reads no value
    assert _project_al401(tmp_path, HELPER.replace("{TEST}", "losses is None")) == []
