import torch
from torch.utils.data import Dataset


class UnalignedDataset(Dataset):
    def __init__(self, opt):
        self.size = 100

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return {"A": torch.zeros(3, 256, 256), "B": torch.zeros(3, 256, 256), "A_paths": str(index)}
