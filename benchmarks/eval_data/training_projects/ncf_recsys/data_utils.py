"""Implicit-feedback interactions with negatives re-sampled every epoch."""
import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch.utils.data as data


def load_all(train_rating, test_negative):
    train_data = pd.read_csv(train_rating, sep="\t", header=None, names=["user", "item"], usecols=[0, 1])
    user_num, item_num = train_data["user"].max() + 1, train_data["item"].max() + 1
    train_data = train_data.values.tolist()
    train_mat = sp.dok_matrix((user_num, item_num), dtype=np.float32)
    for u, i in train_data:
        train_mat[u, i] = 1.0
    test_data = []
    with open(test_negative) as fd:
        for line in fd:
            arr = line.split("\t")
            u, pos = eval(arr[0])
            test_data.append([u, pos])
            test_data.extend([u, int(i)] for i in arr[1:])
    return train_data, test_data, user_num, item_num, train_mat


class NCFData(data.Dataset):
    def __init__(self, features, num_item, train_mat=None, num_ng=0, is_training=None):
        self.features_ps = features
        self.num_item = num_item
        self.train_mat = train_mat
        self.num_ng = num_ng
        self.is_training = is_training
        self.labels = [0 for _ in range(len(features))]

    def ng_sample(self):
        self.features_ng = []
        for x in self.features_ps:
            u = x[0]
            for _ in range(self.num_ng):
                j = np.random.randint(self.num_item)
                while (u, j) in self.train_mat:
                    j = np.random.randint(self.num_item)
                self.features_ng.append([u, j])
        self.features_fill = self.features_ps + self.features_ng
        self.labels_fill = [1] * len(self.features_ps) + [0] * len(self.features_ng)

    def __len__(self):
        return (self.num_ng + 1) * len(self.labels)

    def __getitem__(self, idx):
        features = self.features_fill if self.is_training else self.features_ps
        labels = self.labels_fill if self.is_training else self.labels
        return features[idx][0], features[idx][1], labels[idx]
