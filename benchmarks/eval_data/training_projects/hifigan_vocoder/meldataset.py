"""Waveform segments and their mel spectrograms, cut to a fixed length."""
import random

import numpy as np
import torch
import torch.utils.data
from scipy.io.wavfile import read

_mel_basis = {}


def mel_spectrogram(y, n_fft=1024, num_mels=80, hop_size=256, win_size=1024):
    key = str(y.device)
    if key not in _mel_basis:
        _mel_basis[key] = torch.randn(num_mels, n_fft // 2 + 1, device=y.device).abs()
    spec = torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size,
                      window=torch.hann_window(win_size, device=y.device), return_complex=True).abs()
    return torch.log(torch.clamp(torch.matmul(_mel_basis[key], spec), min=1e-5))


class MelDataset(torch.utils.data.Dataset):
    def __init__(self, files, segment_size=8192):
        self.files = files
        self.segment_size = segment_size

    def __getitem__(self, index):
        sr, audio = read(self.files[index])
        audio = torch.FloatTensor(audio.astype(np.float32) / 32768.0).unsqueeze(0)
        if audio.size(1) >= self.segment_size:
            start = random.randint(0, audio.size(1) - self.segment_size)
            audio = audio[:, start:start + self.segment_size]
        else:
            audio = torch.nn.functional.pad(audio, (0, self.segment_size - audio.size(1)))
        mel = mel_spectrogram(audio)
        return mel.squeeze(0), audio.squeeze(0)

    def __len__(self):
        return len(self.files)
