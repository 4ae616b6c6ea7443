"""Trains a character-level language model."""
import torch
from torch.utils.data import Dataset

from mingpt.trainer import Trainer


class CharDataset(Dataset):
    def __init__(self, data, block_size=128):
        self.data = data
        self.block_size = block_size

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, idx):
        chunk = torch.tensor(self.data[idx:idx + self.block_size + 1], dtype=torch.long)
        return chunk[:-1], chunk[1:]


class Config:
    device = "auto"
    learning_rate = 5e-4
    batch_size = 64
    num_workers = 4
    grad_norm_clip = 1.0
    max_iters = None


if __name__ == "__main__":
    train_dataset = CharDataset(list(range(10000)))
    model = torch.nn.Linear(1, 1)
    trainer = Trainer(Config(), model, train_dataset)

    def batch_end_callback(trainer):
        if trainer.iter_num % 10 == 0:
            print(f"iter_dt {trainer.iter_dt * 1000:.2f}ms; iter {trainer.iter_num}: train loss {trainer.loss.item():.5f}")

    trainer.add_callback("on_batch_end", batch_end_callback)
    trainer.run()
