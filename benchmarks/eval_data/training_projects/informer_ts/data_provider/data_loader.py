import os

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset


class Dataset_ETT_hour(Dataset):
    def __init__(self, root_path, flag="train", size=None, data_path="ETTh1.csv"):
        self.seq_len, self.label_len, self.pred_len = size
        df = pd.read_csv(os.path.join(root_path, data_path))
        borders = {"train": (0, 8640), "val": (8640, 11520), "test": (11520, 14400)}
        lo, hi = borders.get(flag, (11520, 14400))
        values = df[df.columns[1:]].values.astype(np.float32)
        mean, std = values[:8640].mean(0), values[:8640].std(0) + 1e-6
        self.data = (values[lo:hi] - mean) / std
        stamps = pd.to_datetime(df["date"][lo:hi])
        self.stamp = np.stack([stamps.dt.month, stamps.dt.day, stamps.dt.weekday, stamps.dt.hour], 1).astype(np.float32)

    def __getitem__(self, index):
        s_end = index + self.seq_len
        r_begin = s_end - self.label_len
        r_end = r_begin + self.label_len + self.pred_len
        return (torch.from_numpy(self.data[index:s_end]), torch.from_numpy(self.data[r_begin:r_end]),
                torch.from_numpy(self.stamp[index:s_end]), torch.from_numpy(self.stamp[r_begin:r_end]))

    def __len__(self):
        return len(self.data) - self.seq_len - self.pred_len + 1
