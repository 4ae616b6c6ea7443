"""Stems of MUSDB tracks read from WAV files, cut into segments."""
import os

import torch
import torchaudio
from torch.utils.data import Dataset

SOURCES = ["drums", "bass", "other", "vocals"]


class WavSet(Dataset):
    def __init__(self, root, split, segment=None, samplerate=44100):
        self.root = os.path.join(root, split)
        self.tracks = sorted(os.listdir(self.root))
        self.segment, self.samplerate = segment, samplerate

    def __len__(self):
        return len(self.tracks)

    def __getitem__(self, index):
        track = os.path.join(self.root, self.tracks[index])
        frames = -1 if self.segment is None else self.segment * self.samplerate
        wavs = [torchaudio.load(os.path.join(track, f"{s}.wav"), num_frames=frames)[0] for s in SOURCES]
        example = torch.stack(wavs)
        if self.segment is None:
            return example.sum(0), example
        return example
