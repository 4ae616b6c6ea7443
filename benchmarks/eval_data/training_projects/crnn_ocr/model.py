import torch.nn as nn


class CRNN(nn.Module):
    def __init__(self, nclass, nh=256):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 64, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(64, 128, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(128, 256, 3, 1, 1), nn.BatchNorm2d(256), nn.ReLU(True), nn.AdaptiveAvgPool2d((1, None)))
        self.rnn = nn.LSTM(256, nh, bidirectional=True)
        self.fc = nn.Linear(nh * 2, nclass)

    def forward(self, x):
        conv = self.cnn(x).squeeze(2).permute(2, 0, 1)
        out, _ = self.rnn(conv)
        return self.fc(out)
