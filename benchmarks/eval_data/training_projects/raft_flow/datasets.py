"""Optical-flow datasets in the layout of a RAFT-style repository: a FlowDataset base with its own
sparse/dense readers and a fetch_dataloader() the training script imports as `import datasets`."""
import os.path as osp
import random
from glob import glob

import numpy as np
import torch
import torch.utils.data as data

from augmentor import FlowAugmentor
from frame_utils import read_gen


class FlowDataset(data.Dataset):
    def __init__(self, aug_params=None):
        self.augmentor = FlowAugmentor(**aug_params) if aug_params is not None else None
        self.flow_list = []
        self.image_list = []

    def __getitem__(self, index):
        index = index % len(self.image_list)
        flow = np.array(read_gen(self.flow_list[index])).astype(np.float32)
        img1 = np.array(read_gen(self.image_list[index][0])).astype(np.uint8)[..., :3]
        img2 = np.array(read_gen(self.image_list[index][1])).astype(np.uint8)[..., :3]
        if self.augmentor is not None:
            img1, img2, flow = self.augmentor(img1, img2, flow)
        img1 = torch.from_numpy(img1).permute(2, 0, 1).float()
        img2 = torch.from_numpy(img2).permute(2, 0, 1).float()
        flow = torch.from_numpy(flow).permute(2, 0, 1).float()
        valid = ((flow[0].abs() < 1000) & (flow[1].abs() < 1000)).float()
        return img1, img2, flow, valid

    def __len__(self):
        return len(self.image_list)


class FlyingChairs(FlowDataset):
    def __init__(self, aug_params=None, root="datasets/FlyingChairs_release/data"):
        super().__init__(aug_params)
        images = sorted(glob(osp.join(root, "*.ppm")))
        flows = sorted(glob(osp.join(root, "*.flo")))
        for i in range(len(flows)):
            self.flow_list.append(flows[i])
            self.image_list.append([images[2 * i], images[2 * i + 1]])


def fetch_dataloader(args):
    aug_params = {"crop_size": args.image_size, "min_scale": -0.1, "max_scale": 1.0, "do_flip": True}
    train_dataset = FlyingChairs(aug_params)
    train_loader = data.DataLoader(train_dataset, batch_size=args.batch_size, pin_memory=False,  # label: AL301
                                   shuffle=True, num_workers=4, drop_last=True)
    print("Training with %d image pairs" % len(train_dataset))
    random.seed(0)
    return train_loader
