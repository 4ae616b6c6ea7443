import torch
from torch.utils.data import Dataset


class CocoDetection(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.zeros(3, 512, 512), {"labels": torch.zeros(3, dtype=torch.long), "boxes": torch.zeros(3, 4)}


def build(image_set, args):
    return CocoDetection()
