"""Text-line images from an LMDB-like folder, resized to a fixed height and padded by the collate."""
import os

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset


class LineDataset(Dataset):
    def __init__(self, root, imgH=32):
        self.root = root
        self.imgH = imgH
        with open(os.path.join(root, "labels.txt"), encoding="utf-8") as f:
            self.items = [line.rstrip("\n").split("\t", 1) for line in f]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        name, text = self.items[index]
        img = Image.open(os.path.join(self.root, name)).convert("L")
        w = max(int(img.size[0] * self.imgH / img.size[1]), self.imgH)
        img = img.resize((w, self.imgH))
        arr = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0)[None]
        return arr, text


class AlignCollate:
    def __call__(self, batch):
        images, texts = zip(*batch)
        width = max(im.shape[-1] for im in images)
        out = torch.zeros(len(images), 1, images[0].shape[1], width)
        for i, im in enumerate(images):
            out[i, :, :, : im.shape[-1]] = im
        return out, list(texts)
