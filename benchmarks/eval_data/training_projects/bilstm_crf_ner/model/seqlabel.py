"""Word embeddings, a BiLSTM encoder and a CRF decoder."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .crf import CRF


class SeqLabel(nn.Module):
    def __init__(self, data):
        super().__init__()
        self.gpu = data.HP_gpu
        self.embedding = nn.Embedding(data.word_alphabet_size, data.word_emb_dim)
        self.lstm = nn.LSTM(data.word_emb_dim, data.HP_hidden_dim // 2, num_layers=1, batch_first=True,
                            bidirectional=True)
        self.drop = nn.Dropout(data.HP_dropout)
        self.hidden2tag = nn.Linear(data.HP_hidden_dim, data.label_alphabet_size + 2)
        self.crf = CRF(data.label_alphabet_size, self.gpu)

    def _features(self, word_inputs, word_seq_lengths):
        embeds = self.drop(self.embedding(word_inputs))
        packed = pack_padded_sequence(embeds, word_seq_lengths.cpu().numpy(), batch_first=True)  # label: AL401
        lstm_out, _ = self.lstm(packed)
        lstm_out, _ = pad_packed_sequence(lstm_out, batch_first=True)
        return self.hidden2tag(self.drop(lstm_out))

    def calculate_loss(self, word_inputs, word_seq_lengths, batch_label, mask):
        outs = self._features(word_inputs, word_seq_lengths)
        total_loss = self.crf.neg_log_likelihood_loss(outs, mask, batch_label)
        _, tag_seq = self.crf._viterbi_decode(outs, mask)
        return total_loss / word_inputs.size(0), tag_seq
