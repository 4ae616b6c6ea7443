import math

import numpy as np
import torch
import torchaudio
from torch.utils.data import DataLoader, Dataset, Sampler


class SpectrogramDataset(Dataset):
    def __init__(self, manifest_filepath, labels, sample_rate=16000, window_size=0.02, window_stride=0.01):
        with open(manifest_filepath) as f:
            self.ids = [line.strip().split(",") for line in f]
        self.labels_map = {label: i for i, label in enumerate(labels)}
        self.n_fft = int(sample_rate * window_size)
        self.hop_length = int(sample_rate * window_stride)

    def parse_audio(self, audio_path):
        waveform, _ = torchaudio.load(audio_path)
        spect = torch.stft(waveform[0], n_fft=self.n_fft, hop_length=self.hop_length,
                           window=torch.hamming_window(self.n_fft), return_complex=True).abs()
        spect = torch.log1p(spect)
        return (spect - spect.mean()) / spect.std()

    def parse_transcript(self, transcript_path):
        with open(transcript_path, encoding="utf8") as f:
            transcript = f.read().replace("\n", "")
        return [self.labels_map[c] for c in transcript if c in self.labels_map]

    def __getitem__(self, index):
        audio_path, transcript_path = self.ids[index]
        return self.parse_audio(audio_path), self.parse_transcript(transcript_path)

    def __len__(self):
        return len(self.ids)


def _collate_fn(batch):
    batch = sorted(batch, key=lambda sample: sample[0].size(1), reverse=True)
    freq_size = batch[0][0].size(0)
    max_seqlength = batch[0][0].size(1)
    inputs = torch.zeros(len(batch), 1, freq_size, max_seqlength)
    input_percentages = torch.FloatTensor(len(batch))
    target_sizes = torch.IntTensor(len(batch))
    targets = []
    for x, (tensor, target) in enumerate(batch):
        seq_length = tensor.size(1)
        inputs[x][0].narrow(1, 0, seq_length).copy_(tensor)
        input_percentages[x] = seq_length / float(max_seqlength)
        target_sizes[x] = len(target)
        targets.extend(target)
    return inputs, torch.tensor(targets, dtype=torch.long), input_percentages, target_sizes


class AudioDataLoader(DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.collate_fn = _collate_fn


class BucketingSampler(Sampler):
    def __init__(self, data_source, batch_size=1):
        super().__init__(data_source)
        ids = list(range(0, len(data_source)))
        self.bins = [ids[i:i + batch_size] for i in range(0, len(ids), batch_size)]

    def __iter__(self):
        for ids in self.bins:
            np.random.shuffle(ids)
            yield ids

    def __len__(self):
        return len(self.bins)

    def shuffle(self, epoch):
        np.random.shuffle(self.bins)
