from collections import defaultdict

import torch
import torch.nn.functional as F
from transformers import Trainer


class DistillationTrainer(Trainer):
    """Knowledge distillation: the student matches the teacher's softened logits and the labels."""

    def __init__(self, *args, teacher_model=None, alpha=0.5, temperature=2.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = teacher_model
        self.teacher.eval()
        self.alpha = alpha
        self.temperature = temperature
        self._stored_metrics = defaultdict(list)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs_student = model(**inputs)
        student_loss = outputs_student.loss
        with torch.no_grad():
            outputs_teacher = self.teacher(**inputs)
        loss_kd = F.kl_div(
            F.log_softmax(outputs_student.logits / self.temperature, dim=-1),
            F.softmax(outputs_teacher.logits / self.temperature, dim=-1),
            reduction="batchmean",
        ) * (self.temperature ** 2)
        loss = self.alpha * student_loss + (1.0 - self.alpha) * loss_kd
        self._stored_metrics["student_loss"].append(student_loss.item())  # label: AL401
        self._stored_metrics["kd_loss"].append(loss_kd.item())  # label: AL401
        return (loss, outputs_student) if return_outputs else loss

    def log(self, logs, start_time=None):
        for key, values in self._stored_metrics.items():
            logs[key] = sum(values) / len(values)
        self._stored_metrics.clear()
        return super().log(logs, start_time)
