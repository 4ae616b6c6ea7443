import torch.nn as nn

from ._deeplab import DeepLabHead


def deeplabv3plus_resnet50(num_classes=21, output_stride=8):
    return nn.Sequential(nn.Conv2d(3, 256, 3, padding=1), DeepLabHead(256, num_classes))
