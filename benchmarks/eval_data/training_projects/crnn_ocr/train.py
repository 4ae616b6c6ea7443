"""Scene-text recognition (CNN + BiLSTM + CTC) in the layout of a CRNN reimplementation."""
import argparse
import random

import numpy as np
import torch
import torch.optim as optim
from torch.nn import CTCLoss
from torch.utils.data import DataLoader

import dataset
import utils
from model import CRNN

parser = argparse.ArgumentParser()
parser.add_argument("--trainroot", required=True)
parser.add_argument("--valroot", required=True)
parser.add_argument("--workers", type=int, default=4)
parser.add_argument("--batchSize", type=int, default=64)
parser.add_argument("--nepoch", type=int, default=25)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--alphabet", default="0123456789abcdefghijklmnopqrstuvwxyz")
parser.add_argument("--displayInterval", type=int, default=100)
opt = parser.parse_args()

random.seed(1234)
np.random.seed(1234)
torch.manual_seed(1234)
device = torch.device("cuda")

train_dataset = dataset.LineDataset(opt.trainroot)
train_loader = DataLoader(train_dataset, batch_size=opt.batchSize, shuffle=True,  # label: AL301
                          num_workers=int(opt.workers), collate_fn=dataset.AlignCollate())
val_loader = DataLoader(dataset.LineDataset(opt.valroot), batch_size=opt.batchSize,  # label: AL301 AL304
                        collate_fn=dataset.AlignCollate())

converter = utils.LabelConverter(opt.alphabet)
crnn = CRNN(len(opt.alphabet) + 1).to(device)
criterion = CTCLoss(zero_infinity=True)
optimizer = optim.Adam(crnn.parameters(), lr=opt.lr, betas=(0.5, 0.999))
loss_avg = utils.Averager()


def validate(net):
    net.eval()
    n_correct, n_total = 0, 0
    with torch.no_grad():
        for images, texts in val_loader:
            preds = net(images.to(device)).argmax(2).permute(1, 0).cpu().tolist()
            for pred, gt in zip(preds, texts):
                n_correct += converter.decode(pred) == gt
                n_total += 1
    net.train()
    return n_correct / max(n_total, 1)


for epoch in range(opt.nepoch):
    for i, (images, texts) in enumerate(train_loader):  # label: AL403
        images = images.to(device)
        targets, target_lengths = converter.encode(texts)
        preds = crnn(images).log_softmax(2)
        preds_size = torch.full((images.size(0),), preds.size(0), dtype=torch.long)
        cost = criterion(preds, targets, preds_size, target_lengths)
        optimizer.zero_grad()
        cost.backward()
        optimizer.step()
        loss_avg.add(cost)
        if (i + 1) % opt.displayInterval == 0:
            print("[%d/%d][%d/%d] Loss: %f" % (epoch, opt.nepoch, i, len(train_loader), loss_avg.val()))
    print("epoch %d accuracy %.4f" % (epoch, validate(crnn)))
    torch.save(crnn.state_dict(), f"crnn_{epoch}.pth")
