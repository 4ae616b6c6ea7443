"""facebookresearch/dlrm dlrm_s_pytorch.py: DLRM_Net with EmbeddingBag tables, bottom/top MLPs and
the dot interaction (bmm of the stacked features, lower triangle gathered), Criteo Kaggle-like sizes
(smaller tables)."""
import numpy as np
import torch
import torch.nn as nn

LN_EMB = [1460, 583, 10131, 2202, 305, 24, 12517, 633, 3, 9345, 5683, 8351, 3194, 27, 14992, 5461, 10, 5652, 2173, 4, 7046, 18, 15, 2861, 105, 1426]
M_SPA = 16
LN_BOT = [13, 512, 256, 64, 16]
LN_TOP = [367, 512, 256, 1]
BATCH = 128


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n, m = int(ln[i]), int(ln[i + 1])
            layers.append(nn.Linear(int(n), int(m), bias=True))
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return nn.Sequential(*layers)

    def create_emb(self, m, ln):
        return nn.ModuleList([nn.EmbeddingBag(int(n), m, mode="sum") for n in ln])

    def __init__(self):
        super().__init__()
        ln_top = np.array(LN_TOP)
        self.emb_l = self.create_emb(M_SPA, np.array(LN_EMB))
        self.bot_l = self.create_mlp(np.array(LN_BOT), -1)
        self.top_l = self.create_mlp(ln_top, ln_top.size - 2)

    def interact_features(self, x, ly):
        (batch_size, d) = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        _, ni, nj = Z.shape
        li = torch.tensor([i for i in range(ni) for j in range(i)])
        lj = torch.tensor([j for i in range(nj) for j in range(i)])
        Zflat = Z[:, li, lj]
        return torch.cat([x] + [Zflat], dim=1)

    def forward(self, dense_x, lS_i):
        x = self.bot_l(dense_x)
        ly = [emb(lS_i[:, k].unsqueeze(1)) for k, emb in enumerate(self.emb_l)]
        z = self.interact_features(x, ly)
        return self.top_l(z)


MODEL = DLRM_Net
INPUTS = [(BATCH, 13), (BATCH, len(LN_EMB))]
INPUT_DTYPES = ["float32", "int64"]
