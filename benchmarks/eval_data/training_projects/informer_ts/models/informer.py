import torch
import torch.nn as nn


class TokenEmbedding(nn.Module):
    def __init__(self, c_in, d_model):
        super().__init__()
        self.tokenConv = nn.Conv1d(c_in, d_model, kernel_size=3, padding=1, padding_mode="circular")

    def forward(self, x):
        return self.tokenConv(x.permute(0, 2, 1)).transpose(1, 2)


class Informer(nn.Module):
    def __init__(self, enc_in, dec_in, c_out, d_model=512, n_heads=8, pred_len=24):
        super().__init__()
        self.pred_len = pred_len
        self.enc_embedding = TokenEmbedding(enc_in, d_model)
        self.dec_embedding = TokenEmbedding(dec_in, d_model)
        self.mark = nn.Linear(4, d_model)
        self.transformer = nn.Transformer(d_model, n_heads, 2, 1, batch_first=True)
        self.projection = nn.Linear(d_model, c_out)

    def forward(self, x_enc, x_mark_enc, x_dec, x_mark_dec):
        enc = self.enc_embedding(x_enc) + self.mark(x_mark_enc)
        dec = self.dec_embedding(x_dec) + self.mark(x_mark_dec)
        out = self.projection(self.transformer(enc, dec))
        return out[:, -self.pred_len:, :]
