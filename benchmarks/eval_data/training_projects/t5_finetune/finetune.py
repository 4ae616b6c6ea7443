"""Fine-tune T5 for summarisation with a plain PyTorch loop (no Trainer): src/data, src/trainer."""
import argparse

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, get_linear_schedule_with_warmup

from src.data import make_loaders
from src.trainer import evaluate, train_one_epoch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="t5-small")
    parser.add_argument("--train", default="data/train.jsonl")
    parser.add_argument("--val", default="data/val.jsonl")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-4)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model).to(device)
    train_loader, val_loader = make_loaders(tokenizer, args.train, args.val, args.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    total = len(train_loader) * args.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, int(0.06 * total), total)
    best = float("inf")
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, scheduler, device, epoch)
        val_loss = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: train {train_loss:.4f} val {val_loss:.4f}")
        if val_loss < best:
            best = val_loss
            model.save_pretrained("checkpoints/best")


if __name__ == "__main__":
    main()
