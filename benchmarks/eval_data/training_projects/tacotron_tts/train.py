"""Tacotron 2 training in the layout of its reference repository: hparams, data_utils, model, loss."""
import argparse
import math
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from data_utils import TextMelCollate, TextMelLoader
from loss_function import Tacotron2Loss
from model import Tacotron2


def reduce_tensor(tensor, n_gpus):
    rt = tensor.clone()
    dist.all_reduce(rt, op=dist.ReduceOp.SUM)
    return rt / n_gpus


def prepare_dataloaders(hparams):
    trainset = TextMelLoader(hparams.training_files, hparams)
    valset = TextMelLoader(hparams.validation_files, hparams)
    collate_fn = TextMelCollate(hparams.n_frames_per_step)
    train_sampler = DistributedSampler(trainset) if hparams.distributed_run else None
    shuffle = train_sampler is None
    train_loader = DataLoader(trainset, num_workers=1, shuffle=shuffle, sampler=train_sampler,
                              batch_size=hparams.batch_size, pin_memory=True, drop_last=True, collate_fn=collate_fn)
    return train_loader, valset, collate_fn


def validate(model, criterion, valset, iteration, batch_size, collate_fn):
    model.eval()
    with torch.no_grad():
        val_loader = DataLoader(valset, num_workers=1, shuffle=False, batch_size=batch_size, pin_memory=False,  # label: AL301
                                collate_fn=collate_fn)
        val_loss = 0.0
        for i, batch in enumerate(val_loader):
            x, y = model.parse_batch(batch)
            y_pred = model(x)
            val_loss += criterion(y_pred, y).item()
        val_loss = val_loss / (i + 1)
    model.train()
    print("Validation loss {}: {:9f}".format(iteration, val_loss))


def train(output_directory, hparams, rank, n_gpus):
    torch.manual_seed(hparams.seed)
    torch.cuda.manual_seed(hparams.seed)
    model = Tacotron2(hparams).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=hparams.learning_rate, weight_decay=hparams.weight_decay)
    scaler = torch.cuda.amp.GradScaler(enabled=hparams.fp16_run)
    criterion = Tacotron2Loss()
    train_loader, valset, collate_fn = prepare_dataloaders(hparams)
    iteration = 0
    model.train()
    for epoch in range(hparams.epochs):
        for i, batch in enumerate(train_loader):
            start = time.perf_counter()
            model.zero_grad()
            x, y = model.parse_batch(batch)
            with torch.autocast("cuda", enabled=hparams.fp16_run):
                y_pred = model(x)
                loss = criterion(y_pred, y)
            if hparams.distributed_run:
                reduced_loss = reduce_tensor(loss.data, n_gpus).item()  # label: AL401
            else:
                reduced_loss = loss.item()  # label: AL401
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hparams.grad_clip_thresh)
            scaler.step(optimizer)
            scaler.update()
            if rank == 0:
                duration = time.perf_counter() - start
                print("Train loss {} {:.6f} Grad Norm {:.6f} {:.2f}s/it".format(  # label: AL401
                    iteration, reduced_loss, grad_norm, duration))
            if iteration % hparams.iters_per_checkpoint == 0:
                validate(model, criterion, valset, iteration, hparams.batch_size, collate_fn)
                if rank == 0:
                    torch.save(model.state_dict(), os.path.join(output_directory, f"checkpoint_{iteration}"))
            iteration += 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-o", "--output_directory", type=str, required=True)
    parser.add_argument("--n_gpus", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    args = parser.parse_args()
    hparams = argparse.Namespace(training_files="filelists/train.txt", validation_files="filelists/val.txt",
                                 n_mel_channels=80, n_frames_per_step=1, seed=1234, batch_size=64, epochs=500,
                                 learning_rate=1e-3, weight_decay=1e-6, grad_clip_thresh=1.0, fp16_run=False,
                                 distributed_run=args.n_gpus > 1, iters_per_checkpoint=1000,
                                 cudnn_enabled=True, cudnn_benchmark=False)
    torch.backends.cudnn.enabled = hparams.cudnn_enabled
    torch.backends.cudnn.benchmark = hparams.cudnn_benchmark
    train(args.output_directory, hparams, args.rank, args.n_gpus)
