"""KITTI raw frames: the centre frame, its neighbours, colour augmentation, ground-truth depth."""
import os

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms


class KITTIRAWDataset(Dataset):
    def __init__(self, data_path, height, width, is_train=False):
        self.data_path, self.height, self.width, self.is_train = data_path, height, width, is_train
        with open(os.path.join(data_path, "train_files.txt")) as f:
            self.filenames = f.read().splitlines()
        self.to_tensor = transforms.ToTensor()
        self.resize = transforms.Resize((height, width))
        self.color_aug = transforms.ColorJitter(0.2, 0.2, 0.2, 0.1)

    def __len__(self):
        return len(self.filenames)

    def __getitem__(self, index):
        folder, frame = self.filenames[index].split()[:2]
        inputs = {}
        for i in (0, 1):
            path = os.path.join(self.data_path, folder, "image_02/data", f"{int(frame) + i:010d}.png")
            img = self.resize(Image.open(path).convert("RGB"))
            inputs[("color", i, 0)] = self.to_tensor(img)
            inputs[("color_aug", i, 0)] = self.to_tensor(self.color_aug(img) if self.is_train else img)
        depth = np.load(os.path.join(self.data_path, folder, "depth", f"{int(frame):010d}.npy"))
        inputs["depth_gt"] = torch.from_numpy(depth.astype(np.float32))[None]
        return inputs
