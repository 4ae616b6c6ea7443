"""Features from a CSV: numeric columns standardised, categoricals one-hot, on the host."""
import numpy as np
import pandas as pd
import torch


def load_features(path, val_fraction=0.2, seed=0):
    df = pd.read_csv(path)
    y = df.pop("default").to_numpy(np.float32)
    df = pd.get_dummies(df, dummy_na=True)
    x = df.to_numpy(np.float32)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    idx = np.random.default_rng(seed).permutation(len(x))
    cut = int(len(x) * (1 - val_fraction))
    tr, va = idx[:cut], idx[cut:]
    return ((torch.from_numpy(x[tr]), torch.from_numpy(y[tr])[:, None]),
            (torch.from_numpy(x[va]), torch.from_numpy(y[va])[:, None]))
