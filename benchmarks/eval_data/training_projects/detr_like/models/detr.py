import torch
import torch.nn as nn

from .backbone import Backbone


class DETR(nn.Module):
    def __init__(self, num_classes, num_queries=100):
        super().__init__()
        self.backbone = Backbone("resnet50")
        self.query_embed = nn.Embedding(num_queries, 256)
        self.class_embed = nn.Linear(256, num_classes + 1)

    def forward(self, samples):
        return {"pred_logits": self.class_embed(self.query_embed.weight).unsqueeze(0)}


class SetCriterion(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.weight_dict = {"loss_ce": 1.0}

    def forward(self, outputs, targets):
        loss = outputs["pred_logits"].float().mean()
        return {"loss_ce": loss, "class_error": torch.zeros((), device=loss.device)}


def build(args):
    return DETR(91), SetCriterion(91)
