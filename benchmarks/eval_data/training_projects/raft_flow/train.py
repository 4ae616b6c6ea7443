"""Training entry point in the layout of a RAFT-style optical-flow repository."""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

import datasets
from raft import RAFT

MAX_FLOW = 400
SUM_FREQ = 100
VAL_FREQ = 5000


def sequence_loss(flow_preds, flow_gt, valid, gamma=0.8):
    """Exponentially weighted L1 over the refinement iterations, plus end-point-error metrics."""
    n_predictions = len(flow_preds)
    flow_loss = 0.0
    mag = torch.sum(flow_gt ** 2, dim=1).sqrt()
    valid = (valid >= 0.5) & (mag < MAX_FLOW)
    for i in range(n_predictions):
        i_weight = gamma ** (n_predictions - i - 1)
        i_loss = (flow_preds[i] - flow_gt).abs()
        flow_loss += i_weight * (valid[:, None] * i_loss).mean()
    epe = torch.sum((flow_preds[-1] - flow_gt) ** 2, dim=1).sqrt()
    epe = epe.view(-1)[valid.view(-1)]
    metrics = {
        "epe": epe.mean().item(),  # label: AL401
        "1px": (epe < 1).float().mean().item(),  # label: AL401
        "3px": (epe < 3).float().mean().item(),  # label: AL401
    }
    return flow_loss, metrics


class Logger:
    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.total_steps = 0
        self.running_loss = {}

    def push(self, metrics):
        self.total_steps += 1
        for key in metrics:
            self.running_loss[key] = self.running_loss.get(key, 0.0) + metrics[key]
        if self.total_steps % SUM_FREQ == SUM_FREQ - 1:
            print({k: v / SUM_FREQ for k, v in self.running_loss.items()})
            self.running_loss = {}


def train(args):
    model = nn.DataParallel(RAFT(args), device_ids=args.gpus)
    model.cuda()
    model.train()
    train_loader = datasets.fetch_dataloader(args)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.wdecay, eps=args.epsilon)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, args.lr, args.num_steps + 100, pct_start=0.05,
                                              anneal_strategy="linear")
    scaler = torch.cuda.amp.GradScaler(enabled=args.mixed_precision)
    logger = Logger(scheduler)
    total_steps = 0
    should_keep_training = True
    while should_keep_training:
        for i_batch, data_blob in enumerate(train_loader):
            optimizer.zero_grad()
            image1, image2, flow, valid = [x.cuda() for x in data_blob]
            flow_predictions = model(image1, image2, iters=args.iters)
            loss, metrics = sequence_loss(flow_predictions, flow, valid, args.gamma)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            scaler.step(optimizer)
            scheduler.step()
            scaler.update()
            logger.push(metrics)
            total_steps += 1
            if total_steps > args.num_steps:
                should_keep_training = False
                break
    return model


if __name__ == "__main__":  # label: AL303
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="raft")
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--num_steps", type=int, default=100000)
    parser.add_argument("--batch_size", type=int, default=6)
    parser.add_argument("--image_size", type=int, nargs="+", default=[384, 512])
    parser.add_argument("--gpus", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--mixed_precision", action="store_true")
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--wdecay", type=float, default=0.00005)
    parser.add_argument("--epsilon", type=float, default=1e-8)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.8)
    args = parser.parse_args()
    torch.manual_seed(1234)
    np.random.seed(1234)
    os.makedirs("checkpoints", exist_ok=True)
    train(args)
