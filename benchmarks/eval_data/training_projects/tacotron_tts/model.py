import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, n_symbols=148, dim=512):
        super().__init__()
        self.embedding = nn.Embedding(n_symbols, dim)
        self.convs = nn.Sequential(*[nn.Sequential(nn.Conv1d(dim, dim, 5, padding=2), nn.BatchNorm1d(dim), nn.ReLU())
                                     for _ in range(3)])
        self.lstm = nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)

    def forward(self, text):
        x = self.convs(self.embedding(text).transpose(1, 2)).transpose(1, 2)
        return self.lstm(x)[0]


class Tacotron2(nn.Module):
    def __init__(self, hparams):
        super().__init__()
        self.n_mel = hparams.n_mel_channels
        self.encoder = Encoder()
        self.decoder = nn.LSTM(512, 1024, batch_first=True)
        self.mel_proj = nn.Linear(1024, self.n_mel)
        self.gate_proj = nn.Linear(1024, 1)

    def parse_batch(self, batch):
        text_padded, input_lengths, mel_padded, gate_padded, output_lengths = batch
        text_padded = text_padded.cuda().long()  # label: AL302
        input_lengths = input_lengths.cuda().long()  # label: AL302
        max_len = torch.max(input_lengths.data).item()  # label: AL401
        mel_padded = mel_padded.cuda().float()  # label: AL302
        gate_padded = gate_padded.cuda().float()  # label: AL302
        output_lengths = output_lengths.cuda().long()  # label: AL302
        return (text_padded, input_lengths, mel_padded, max_len, output_lengths), (mel_padded, gate_padded)

    def forward(self, inputs):
        text, input_lengths, mels, max_len, output_lengths = inputs
        memory = self.encoder(text)
        out, _ = self.decoder(memory.mean(1, keepdim=True).expand(-1, mels.size(2), -1).contiguous())
        return self.mel_proj(out).transpose(1, 2), self.gate_proj(out).squeeze(2)
