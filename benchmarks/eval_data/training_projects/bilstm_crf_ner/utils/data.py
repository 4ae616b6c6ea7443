"""Alphabets, instances read from BMES files, and padded batches."""
import torch


class Data:
    def __init__(self):
        self.word2id, self.label2id = {"</pad>": 0}, {}
        self.train_Ids = []
        self.word_emb_dim, self.HP_hidden_dim, self.HP_dropout = 50, 200, 0.5
        self.HP_batch_size, self.HP_iteration, self.HP_lr, self.HP_momentum, self.HP_l2 = 10, 100, 0.015, 0.0, 1e-8
        self.HP_gpu = False

    @property
    def word_alphabet_size(self):
        return len(self.word2id)

    @property
    def label_alphabet_size(self):
        return len(self.label2id)

    def _sentences(self, path):
        words, labels = [], []
        with open(path) as f:
            for line in f:
                if line.strip():
                    w, lab = line.split()
                    words.append(w)
                    labels.append(lab)
                elif words:
                    yield words, labels
                    words, labels = [], []

    def build_alphabet(self, path):
        for words, labels in self._sentences(path):
            for w in words:
                self.word2id.setdefault(w, len(self.word2id))
            for lab in labels:
                self.label2id.setdefault(lab, len(self.label2id))

    def generate_instance(self, path):
        self.train_Ids = [([self.word2id[w] for w in words], [self.label2id[lab] for lab in labels])
                          for words, labels in self._sentences(path)]


def batchify_with_label(input_batch_list, gpu):
    batch_size = len(input_batch_list)
    lengths = torch.LongTensor([len(sent[0]) for sent in input_batch_list])
    max_len = int(lengths.max())
    words = torch.zeros((batch_size, max_len), dtype=torch.long)
    labels = torch.zeros((batch_size, max_len), dtype=torch.long)
    mask = torch.zeros((batch_size, max_len), dtype=torch.bool)
    for i, (seq, label) in enumerate(input_batch_list):
        words[i, :len(seq)] = torch.LongTensor(seq)
        labels[i, :len(label)] = torch.LongTensor(label)
        mask[i, :len(seq)] = True
    lengths, perm = lengths.sort(0, descending=True)
    words, labels, mask = words[perm], labels[perm], mask[perm]
    _, recover = perm.sort(0)
    if gpu:
        words, lengths, recover, labels, mask = words.cuda(), lengths.cuda(), recover.cuda(), labels.cuda(), mask.cuda()
    return words, lengths, recover, labels, mask
