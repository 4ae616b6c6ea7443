"""r9y9/wavenet_vocoder: WaveNet (raw scalar input, 2 stacks × 10 layers, residual 64, gate 128,
skip 64, kernel 3, no conditioning). Our own code after reading wavenet.py and modules.py:
ResidualConv1dGLU (dilated conv split into tanh and sigmoid halves, 1×1 out and skip convs,
residual scaled by √0.5), skips summed and scaled by √(1/L), ReLU-1×1 conv head."""

import math

import torch
import torch.nn.functional as F
from torch import nn

INPUT_SHAPE = (1, 1, 8000)


class Conv1d1x1(nn.Conv1d):
    def __init__(self, in_channels, out_channels, bias=True):
        super().__init__(in_channels, out_channels, kernel_size=1, bias=bias)


class ResidualConv1dGLU(nn.Module):
    def __init__(self, residual_channels, gate_channels, kernel_size, skip_out_channels, dilation=1, dropout=0.05):
        super().__init__()
        self.dropout = dropout
        padding = (kernel_size - 1) // 2 * dilation
        self.conv = nn.Conv1d(residual_channels, gate_channels, kernel_size, padding=padding, dilation=dilation)
        gate_out_channels = gate_channels // 2
        self.conv1x1_out = Conv1d1x1(gate_out_channels, residual_channels)
        self.conv1x1_skip = Conv1d1x1(gate_out_channels, skip_out_channels)

    def forward(self, x):
        residual = x
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.conv(x)
        a, b = x.split(x.size(1) // 2, dim=1)
        x = torch.tanh(a) * torch.sigmoid(b)
        s = self.conv1x1_skip(x)
        x = self.conv1x1_out(x)
        x = (x + residual) * math.sqrt(0.5)
        return x, s


class WaveNet(nn.Module):
    def __init__(self, out_channels=30, layers=20, stacks=2, residual_channels=64, gate_channels=128,
                 skip_out_channels=64, kernel_size=3):
        super().__init__()
        layers_per_stack = layers // stacks
        self.first_conv = Conv1d1x1(1, residual_channels)
        self.conv_layers = nn.ModuleList(
            ResidualConv1dGLU(residual_channels, gate_channels, kernel_size, skip_out_channels,
                              dilation=2 ** (layer % layers_per_stack))
            for layer in range(layers))
        self.last_conv_layers = nn.ModuleList([
            nn.ReLU(inplace=True), Conv1d1x1(skip_out_channels, skip_out_channels),
            nn.ReLU(inplace=True), Conv1d1x1(skip_out_channels, out_channels),
        ])

    def forward(self, x):
        x = self.first_conv(x)
        skips = 0
        for f in self.conv_layers:
            x, h = f(x)
            skips += h
        skips *= math.sqrt(1.0 / len(self.conv_layers))
        x = skips
        for f in self.last_conv_layers:
            x = f(x)
        return x


MODEL = WaveNet
