"""A Hugging Face Trainer subclass's compute_loss / training_step run once per training step (the
library's loop calls them): their syncs of the batch's tensors are AL401, as in a loop of the file."""

from __future__ import annotations

from archlint.code.engine import lint_text

TRAINER = """import torch.nn.functional as F
from transformers import Trainer


class DistillationTrainer({BASE}):
    def __init__(self, *args, teacher=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = teacher
        self.metrics = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        teacher_logits = self.teacher(**inputs).logits.detach()
        kd = F.kl_div(outputs.logits.log_softmax(-1), teacher_logits.softmax(-1), reduction="batchmean")
        loss = 0.5 * outputs.loss + 0.5 * kd
        self.metrics.append({RECORD})
        return (loss, outputs) if return_outputs else loss
"""


def _al401(base: str, record: str) -> list[int]:
    text = TRAINER.replace("{BASE}", base).replace("{RECORD}", record)
    return [d.line for d in lint_text(text, "trainer.py") if d.code == "AL401"]


def test_compute_loss_of_a_trainer_subclass_is_per_step():
    assert _al401("Trainer", "kd.item()") == [16]


def test_negative_twins():
    assert _al401("Trainer", "kd.detach()") == []  # kept on the device
    assert _al401("object", "kd.item()") == []  # not a library trainer: nothing says it runs per step
