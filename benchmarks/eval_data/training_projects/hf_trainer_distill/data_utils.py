from datasets import load_dataset


def load_and_tokenize(tokenizer, task="sst2", max_length=128):
    raw = load_dataset("glue", task)

    def tokenize(batch):
        return tokenizer(batch["sentence"], truncation=True, max_length=max_length)

    tokenized = raw.map(tokenize, batched=True, remove_columns=["sentence", "idx"])
    return tokenized.rename_column("label", "labels")
