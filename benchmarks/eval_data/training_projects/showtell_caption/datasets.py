"""Images and encoded captions from HDF5 and JSON files written by a preprocessing script."""
import json
import os

import h5py
import torch
from torch.utils.data import Dataset


class CaptionDataset(Dataset):
    def __init__(self, data_folder, data_name, split):
        self.h = h5py.File(os.path.join(data_folder, f"{split}_IMAGES_{data_name}.hdf5"), "r")
        self.imgs = self.h["images"]
        self.cpi = self.h.attrs["captions_per_image"]
        with open(os.path.join(data_folder, f"{split}_CAPTIONS_{data_name}.json")) as j:
            self.captions = json.load(j)
        with open(os.path.join(data_folder, f"{split}_CAPLENS_{data_name}.json")) as j:
            self.caplens = json.load(j)

    def __getitem__(self, i):
        img = torch.FloatTensor(self.imgs[i // self.cpi][None] / 255.0)
        return img, torch.LongTensor(self.captions[i]), torch.LongTensor([self.caplens[i]])

    def __len__(self):
        return len(self.captions)
