import argparse
import os

import numpy as np
import torch
import torch.nn as nn
from torch.utils import data
from torchvision import datasets

import network
import utils.loss


def get_argparser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=str, default="deeplabv3plus_resnet50")
    parser.add_argument("--total_itrs", type=int, default=30000)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--val_batch_size", type=int, default=4)
    parser.add_argument("--gpu_id", type=str, default="0")
    return parser


def validate(model, loader, device):
    model.eval()
    preds_all = []
    with torch.no_grad():
        for i, (images, labels) in enumerate(loader):
            images = images.to(device, dtype=torch.float32)
            outputs = model(images)
            preds_all.append(outputs.detach().max(dim=1)[1].cpu().numpy())
    return preds_all


def main():
    opts = get_argparser().parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = opts.gpu_id
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_dst = datasets.VOCSegmentation("data", image_set="train")
    val_dst = datasets.VOCSegmentation("data", image_set="val")
    train_loader = data.DataLoader(  # label: AL301
        train_dst, batch_size=opts.batch_size, shuffle=True, num_workers=2, drop_last=True)
    val_loader = data.DataLoader(  # label: AL301
        val_dst, batch_size=opts.val_batch_size, shuffle=True, num_workers=2)
    model = network.modeling.__dict__[opts.model](num_classes=21, output_stride=16)
    optimizer = torch.optim.SGD(params=model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    criterion = utils.loss.FocalLoss(ignore_index=255)
    model = nn.DataParallel(model)
    model.to(device)
    interval_loss = 0
    cur_itrs = 0
    cur_epochs = 0
    while True:
        model.train()
        cur_epochs += 1
        for (images, labels) in train_loader:  # label: AL403
            cur_itrs += 1
            images = images.to(device, dtype=torch.float32)
            labels = labels.to(device, dtype=torch.long)
            optimizer.zero_grad()
            outputs = model(images)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            np_loss = loss.detach().cpu().numpy()  # label: AL401
            interval_loss += np_loss
            if (cur_itrs) % 10 == 0:
                interval_loss = interval_loss / 10
                print("Epoch %d, Itrs %d/%d, Loss=%f" % (cur_epochs, cur_itrs, opts.total_itrs, interval_loss))
                interval_loss = 0.0
            if (cur_itrs) % 1000 == 0:
                validate(model, val_loader, device)
                model.train()
            if cur_itrs >= opts.total_itrs:
                return


if __name__ == "__main__":  # label: AL303
    main()
