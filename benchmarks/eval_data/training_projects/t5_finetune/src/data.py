import json

import torch
from torch.utils.data import DataLoader, Dataset


class SummarizationDataset(Dataset):
    def __init__(self, path, tokenizer, max_source_len=512, max_target_len=128):
        with open(path) as f:
            self.rows = [json.loads(line) for line in f]
        self.tokenizer = tokenizer
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        source = self.tokenizer("summarize: " + row["document"], max_length=self.max_source_len,
                                truncation=True, padding="max_length", return_tensors="pt")
        target = self.tokenizer(row["summary"], max_length=self.max_target_len, truncation=True,
                                padding="max_length", return_tensors="pt")
        labels = target["input_ids"].squeeze(0)
        labels[labels == self.tokenizer.pad_token_id] = -100
        return {"input_ids": source["input_ids"].squeeze(0), "attention_mask": source["attention_mask"].squeeze(0),
                "labels": labels}


def make_loaders(tokenizer, train_path, val_path, batch_size):
    train = DataLoader(SummarizationDataset(train_path, tokenizer), batch_size=batch_size, shuffle=True)  # label: AL301 AL304
    val = DataLoader(SummarizationDataset(val_path, tokenizer), batch_size=batch_size * 2)  # label: AL301 AL304
    return train, val
