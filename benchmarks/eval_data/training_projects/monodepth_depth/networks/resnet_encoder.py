import numpy as np
import torch.nn as nn
import torchvision.models as models


class ResnetEncoder(nn.Module):
    def __init__(self, num_layers):
        super().__init__()
        self.num_ch_enc = np.array([64, 64, 128, 256, 512])
        self.encoder = {18: models.resnet18, 34: models.resnet34}[num_layers](weights=None)

    def forward(self, input_image):
        x = (input_image - 0.45) / 0.225
        e = self.encoder
        features = [e.relu(e.bn1(e.conv1(x)))]
        features.append(e.layer1(e.maxpool(features[-1])))
        for layer in (e.layer2, e.layer3, e.layer4):
            features.append(layer(features[-1]))
        return features
