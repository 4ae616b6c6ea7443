import torch
from torch import nn
import torch.nn.functional as F


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.res = nn.Sequential(nn.Conv2d(64, 256, 3, stride=2, padding=1), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.res(F.relu(self.stem(x)))


class GeneralizedRCNN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone = Backbone()
        self.cls_head = nn.Conv2d(256, cfg.MODEL.NUM_CLASSES, 1)
        self.box_head = nn.Conv2d(256, 4, 1)
        self.register_buffer("pixel_mean", torch.tensor([103.53, 116.28, 123.675]).view(-1, 1, 1), False)

    @property
    def device(self):
        return self.pixel_mean.device

    def forward(self, batched_inputs):
        images = torch.stack([x["image"].to(self.device) for x in batched_inputs]) - self.pixel_mean
        features = self.backbone(images)
        logits = self.cls_head(features)
        boxes = self.box_head(features)
        return {"loss_cls": logits.float().pow(2).mean(), "loss_box_reg": boxes.abs().mean()}


def build_model(cfg):
    model = GeneralizedRCNN(cfg)
    model.to(torch.device(cfg.MODEL.DEVICE))
    return model
