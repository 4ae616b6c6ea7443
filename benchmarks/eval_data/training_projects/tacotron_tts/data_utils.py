"""Text/mel pairs and the collate that pads them, in the layout of a Tacotron 2 repository."""
import random

import numpy as np
import torch
import torch.utils.data


class TextMelLoader(torch.utils.data.Dataset):
    def __init__(self, filelist, hparams):
        with open(filelist, encoding="utf-8") as f:
            self.items = [line.strip().split("|") for line in f]
        self.n_mel = hparams.n_mel_channels
        random.seed(hparams.seed)
        random.shuffle(self.items)

    def __getitem__(self, index):
        mel_path, text = self.items[index]
        text_ids = torch.IntTensor([ord(c) % 148 for c in text])
        mel = torch.from_numpy(np.load(mel_path))
        return text_ids, mel

    def __len__(self):
        return len(self.items)


class TextMelCollate:
    def __init__(self, n_frames_per_step=1):
        self.n_frames_per_step = n_frames_per_step

    def __call__(self, batch):
        input_lengths, ids_sorted = torch.sort(torch.LongTensor([len(x[0]) for x in batch]), descending=True)
        text_padded = torch.zeros(len(batch), input_lengths[0], dtype=torch.long)
        for i, idx in enumerate(ids_sorted.tolist()):
            text = batch[idx][0]
            text_padded[i, : text.size(0)] = text
        num_mels = batch[0][1].size(0)
        max_target_len = max(x[1].size(1) for x in batch)
        mel_padded = torch.zeros(len(batch), num_mels, max_target_len)
        gate_padded = torch.zeros(len(batch), max_target_len)
        output_lengths = torch.LongTensor(len(batch))
        for i, idx in enumerate(ids_sorted.tolist()):
            mel = batch[idx][1]
            mel_padded[i, :, : mel.size(1)] = mel
            gate_padded[i, mel.size(1) - 1:] = 1
            output_lengths[i] = mel.size(1)
        return text_padded, input_lengths, mel_padded, gate_padded, output_lengths
