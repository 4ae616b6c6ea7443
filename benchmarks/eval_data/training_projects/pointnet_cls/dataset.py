"""ModelNet-style point clouds: one .npy per shape, sampled to a fixed number of points."""
import os

import numpy as np
import torch
import torch.utils.data as data


class ModelNetDataset(data.Dataset):
    def __init__(self, root, npoints=2500, split="train", data_augmentation=True):
        self.npoints = npoints
        self.root = root
        self.data_augmentation = data_augmentation
        with open(os.path.join(root, f"{split}.txt")) as f:
            self.fns = [line.strip() for line in f]
        self.classes = sorted({fn.split("/")[0] for fn in self.fns})
        self.cat = {c: i for i, c in enumerate(self.classes)}

    def __getitem__(self, index):
        fn = self.fns[index]
        pts = np.load(os.path.join(self.root, fn + ".npy")).astype(np.float32)
        choice = np.random.choice(len(pts), self.npoints, replace=True)
        point_set = pts[choice, :]
        point_set = point_set - np.mean(point_set, axis=0)
        point_set = point_set / np.max(np.sqrt(np.sum(point_set ** 2, axis=1)))
        if self.data_augmentation:
            theta = np.random.uniform(0, np.pi * 2)
            rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
            point_set[:, [0, 2]] = point_set[:, [0, 2]].dot(rot)
            point_set += np.random.normal(0, 0.02, size=point_set.shape)
        cls = self.cat[fn.split("/")[0]]
        return torch.from_numpy(point_set), torch.tensor([cls], dtype=torch.long)

    def __len__(self):
        return len(self.fns)
