import torch


class LabelConverter:
    """Text ↔ CTC label indices (0 is the blank)."""

    def __init__(self, alphabet):
        self.alphabet = alphabet
        self.index = {c: i + 1 for i, c in enumerate(alphabet)}

    def encode(self, texts):
        lengths = [len(t) for t in texts]
        flat = [self.index[c] for t in texts for c in t]
        return torch.tensor(flat, dtype=torch.long), torch.tensor(lengths, dtype=torch.long)

    def decode(self, indices):
        out, prev = [], 0
        for i in indices:
            if i != 0 and i != prev:
                out.append(self.alphabet[i - 1])
            prev = i
        return "".join(out)


class Averager:
    def __init__(self):
        self.n_count = 0
        self.sum = 0.0

    def add(self, v):
        self.sum += float(v.detach())  # label: AL401
        self.n_count += 1

    def val(self):
        return self.sum / max(self.n_count, 1)
