"""A waveform U-Net: strided Conv1d encoder, transposed Conv1d decoder, BiLSTM in the middle."""
import torch
from torch import nn


class BLSTM(nn.Module):
    def __init__(self, dim, layers=2):
        super().__init__()
        self.lstm = nn.LSTM(bidirectional=True, num_layers=layers, hidden_size=dim, input_size=dim)
        self.linear = nn.Linear(2 * dim, dim)

    def forward(self, x):
        x, _ = self.lstm(x.permute(2, 0, 1))
        return self.linear(x).permute(1, 2, 0)


class Demucs(nn.Module):
    def __init__(self, sources, audio_channels=2, channels=64, depth=6, kernel_size=8, stride=4):
        super().__init__()
        self.sources = sources
        self.encoder, self.decoder = nn.ModuleList(), nn.ModuleList()
        in_channels = audio_channels
        for index in range(depth):
            self.encoder.append(nn.Sequential(nn.Conv1d(in_channels, channels, kernel_size, stride), nn.ReLU(),
                                              nn.Conv1d(channels, 2 * channels, 1), nn.GLU(dim=1)))
            out_channels = in_channels if index > 0 else len(sources) * audio_channels
            decode = [nn.Conv1d(channels, 2 * channels, 3), nn.GLU(dim=1),
                      nn.ConvTranspose1d(channels, out_channels, kernel_size, stride)]
            if index > 0:
                decode.append(nn.ReLU())
            self.decoder.insert(0, nn.Sequential(*decode))
            in_channels, channels = channels, 2 * channels
        self.lstm = BLSTM(in_channels)

    def forward(self, mix):
        x = mix
        saved = []
        for encode in self.encoder:
            x = encode(x)
            saved.append(x)
        x = self.lstm(x)
        for decode in self.decoder:
            skip = saved.pop(-1)
            x = decode(x + skip[..., :x.shape[-1]])
        return x.view(x.size(0), len(self.sources), -1, x.size(-1))
