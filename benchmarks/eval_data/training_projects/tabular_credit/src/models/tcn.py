"""A temporal convolutional network for the monthly-statement sequences (another experiment)."""
import torch.nn as nn


class TemporalBlock(nn.Module):
    def __init__(self, n_in, n_out, kernel_size, dilation):
        super().__init__()
        pad = (kernel_size - 1) * dilation
        self.conv = nn.Conv1d(n_in, n_out, kernel_size, padding=pad, dilation=dilation)
        self.chomp = pad
        self.relu = nn.ReLU()
        self.down = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None

    def forward(self, x):
        out = self.relu(self.conv(x)[..., :-self.chomp])
        return out + (x if self.down is None else self.down(x))


class TemporalConvNet(nn.Module):
    def __init__(self, n_inputs, channels=(64, 64), kernel_size=3):
        super().__init__()
        self.net = nn.Sequential(*[TemporalBlock(n_inputs if i == 0 else channels[i - 1], c, kernel_size, 2 ** i)
                                   for i, c in enumerate(channels)])

    def forward(self, x):
        return self.net(x)
