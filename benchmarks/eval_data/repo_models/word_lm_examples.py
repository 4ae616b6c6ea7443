"""pytorch/examples word_language_model: RNNModel (LSTM, 2 layers, 650 hidden, WikiText-2's 33278
words, tied weights off). Our own code after reading model.py: embedding, dropout, nn.LSTM,
decoder Linear to the vocabulary, log_softmax; bptt 35, batch 20."""

import torch.nn.functional as F
from torch import nn

INPUT_SHAPE = (35, 20)
INPUT_DTYPES = ["int64"]


class RNNModel(nn.Module):
    def __init__(self, ntoken=33278, ninp=650, nhid=650, nlayers=2, dropout=0.5):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.ntoken = ntoken

    def forward(self, input):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


MODEL = RNNModel
