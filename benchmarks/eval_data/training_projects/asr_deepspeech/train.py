"""DeepSpeech2-style ASR training: spectrogram dataset, DataLoader subclass, CTC loss."""
import argparse
import json
import time

import torch

from deepspeech.loader.data_loader import AudioDataLoader, BucketingSampler, SpectrogramDataset
from deepspeech.model import DeepSpeech
from deepspeech.utils import AverageMeter, check_loss

parser = argparse.ArgumentParser(description="DeepSpeech training")
parser.add_argument("--train-manifest", default="data/train_manifest.csv")
parser.add_argument("--labels-path", default="labels.json")
parser.add_argument("--batch-size", default=20, type=int)
parser.add_argument("--num-workers", default=4, type=int)
parser.add_argument("--epochs", default=70, type=int)
parser.add_argument("--lr", default=3e-4, type=float)
parser.add_argument("--max-norm", default=400, type=int)
parser.add_argument("--seed", default=123456, type=int)
parser.add_argument("--silent", action="store_true")


def main(args):
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    device = torch.device("cuda")
    with open(args.labels_path) as f:
        labels = json.load(f)

    model = DeepSpeech(labels)
    train_dataset = SpectrogramDataset(args.train_manifest, labels)
    train_sampler = BucketingSampler(train_dataset, batch_size=args.batch_size)
    train_loader = AudioDataLoader(train_dataset, num_workers=args.num_workers, batch_sampler=train_sampler)  # label: AL301
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)

    batch_time, data_time, losses = AverageMeter(), AverageMeter(), AverageMeter()
    for epoch in range(args.epochs):
        model.train()
        end = time.time()
        avg_loss = 0
        for i, data in enumerate(train_loader):  # label: AL403
            inputs, targets, input_percentages, target_sizes = data
            input_sizes = input_percentages.mul_(int(inputs.size(3))).int()
            data_time.update(time.time() - end)
            inputs = inputs.to(device)

            out, output_sizes = model(inputs, input_sizes)
            out = out.transpose(0, 1)
            float_out = out.float()
            loss = criterion(float_out, targets, output_sizes, target_sizes).to(device)
            loss = loss / inputs.size(0)

            loss_value = loss.item()  # label: AL401
            valid_loss, error = check_loss(loss, loss_value)
            if valid_loss:
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
                optimizer.step()
            else:
                print(error)
                loss_value = 0

            avg_loss += loss_value
            losses.update(loss_value, inputs.size(0))
            batch_time.update(time.time() - end)
            end = time.time()
            if not args.silent:
                print("Epoch: [{0}][{1}/{2}]\tTime {batch_time.val:.3f} ({batch_time.avg:.3f})\t"
                      "Loss {loss.val:.4f} ({loss.avg:.4f})\t".format(
                          (epoch + 1), (i + 1), len(train_sampler), batch_time=batch_time, loss=losses))
        avg_loss /= len(train_sampler)
        print("Training Summary Epoch: [{0}]\tAverage Loss {loss:.3f}\t".format(epoch + 1, loss=avg_loss))
        train_sampler.shuffle(epoch)


if __name__ == "__main__":
    main(parser.parse_args())
