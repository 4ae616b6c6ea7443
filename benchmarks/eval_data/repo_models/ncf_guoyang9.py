"""guoyang9/NCF: NCF in its NeuMF-end form (factor_num 32, 3 MLP layers, 10k users and items
here). Our own code after reading model.py: GMF and MLP embeddings, the MLP tower (Dropout-Linear-
ReLU), the two concatenated into the prediction layer."""

import torch
from torch import nn

INPUTS = [(4096,), (4096,)]
INPUT_DTYPES = ["int64", "int64"]


class NCF(nn.Module):
    def __init__(self, user_num=10000, item_num=10000, factor_num=32, num_layers=3, dropout=0.0):
        super().__init__()
        self.embed_user_GMF = nn.Embedding(user_num, factor_num)
        self.embed_item_GMF = nn.Embedding(item_num, factor_num)
        self.embed_user_MLP = nn.Embedding(user_num, factor_num * (2 ** (num_layers - 1)))
        self.embed_item_MLP = nn.Embedding(item_num, factor_num * (2 ** (num_layers - 1)))
        mlp = []
        for i in range(num_layers):
            input_size = factor_num * (2 ** (num_layers - i))
            mlp += [nn.Dropout(p=dropout), nn.Linear(input_size, input_size // 2), nn.ReLU()]
        self.MLP_layers = nn.Sequential(*mlp)
        self.predict_layer = nn.Linear(factor_num * 2, 1)

    def forward(self, user, item):
        output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
        interaction = torch.cat((self.embed_user_MLP(user), self.embed_item_MLP(item)), -1)
        output_MLP = self.MLP_layers(interaction)
        concat = torch.cat((output_GMF, output_MLP), -1)
        return self.predict_layer(concat).view(-1)


MODEL = NCF
