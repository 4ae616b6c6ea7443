import math

import torch
import torch.nn as nn


class SequenceWise(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        x = x.view(t * n, -1)
        x = self.module(x)
        return x.view(t, n, -1)


class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden_size, bidirectional=True):
        super().__init__()
        self.rnn = nn.LSTM(input_size, hidden_size, bidirectional=bidirectional, bias=True)
        self.hidden_size = hidden_size

    def forward(self, x, output_lengths):
        x = nn.utils.rnn.pack_padded_sequence(x, output_lengths.cpu())
        x, _ = self.rnn(x)
        x, _ = nn.utils.rnn.pad_packed_sequence(x)
        return x.view(x.size(0), x.size(1), 2, -1).sum(2)


class DeepSpeech(nn.Module):
    def __init__(self, labels, rnn_hidden_size=1024, nb_layers=5, sample_rate=16000, window_size=0.02):
        super().__init__()
        self.labels = labels
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=(41, 11), stride=(2, 2), padding=(20, 5)),
            nn.BatchNorm2d(32), nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(32, 32, kernel_size=(21, 11), stride=(2, 1), padding=(10, 5)),
            nn.BatchNorm2d(32), nn.Hardtanh(0, 20, inplace=True),
        )
        rnn_input_size = int(math.floor((sample_rate * window_size) / 2) + 1)
        rnn_input_size = int(math.floor(rnn_input_size + 2 * 20 - 41) / 2 + 1)
        rnn_input_size = int(math.floor(rnn_input_size + 2 * 10 - 21) / 2 + 1)
        rnn_input_size *= 32
        self.rnns = nn.ModuleList(
            [BatchRNN(rnn_input_size if i == 0 else rnn_hidden_size, rnn_hidden_size) for i in range(nb_layers)])
        self.fc = SequenceWise(nn.Linear(rnn_hidden_size, len(labels), bias=False))

    def get_seq_lens(self, input_length):
        seq_len = input_length
        for m in self.conv.modules():
            if isinstance(m, nn.Conv2d):
                seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1) // m.stride[1] + 1)
        return seq_len.int()

    def forward(self, x, lengths):
        output_lengths = self.get_seq_lens(lengths)
        x = self.conv(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3]).transpose(1, 2).transpose(0, 1).contiguous()
        for rnn in self.rnns:
            x = rnn(x, output_lengths)
        x = self.fc(x)
        return x.transpose(0, 1).log_softmax(-1), output_lengths
