import torch.nn as nn


class DeepLabHead(nn.Module):
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.classifier = nn.Sequential(nn.Conv2d(in_channels, 256, 3, padding=1, bias=False),
                                        nn.BatchNorm2d(256), nn.ReLU(inplace=True), nn.Conv2d(256, num_classes, 1))

    def forward(self, feature):
        return self.classifier(feature)
