"""tkipf/pygcn: GCN (two GraphConvolution layers, dropout, log_softmax). Our own code after
reading the repository's layers.py and models.py; the normalised adjacency is given dense here
(the repository passes a torch sparse tensor to torch.spmm; N=1024 nodes, 512 features)."""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parameter import Parameter

INPUTS = [(1024, 512), (1024, 1024)]


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = Parameter(torch.FloatTensor(out_features)) if bias else None
        stdv = 1.0 / math.sqrt(out_features)
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.mm(adj, support)
        return output + self.bias if self.bias is not None else output


class GCN(nn.Module):
    def __init__(self, nfeat=512, nhid=16, nclass=7, dropout=0.5):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


MODEL = GCN
