"""Point-cloud classification in the layout of a PointNet reimplementation."""
import argparse
import os
import random

import torch
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data

from dataset import ModelNetDataset
from model import PointNetCls, feature_transform_regularizer

parser = argparse.ArgumentParser()
parser.add_argument("--batchSize", type=int, default=32)
parser.add_argument("--num_points", type=int, default=2500)
parser.add_argument("--workers", type=int, default=4)
parser.add_argument("--nepoch", type=int, default=250)
parser.add_argument("--outf", type=str, default="cls")
parser.add_argument("--dataset", type=str, required=True)
parser.add_argument("--feature_transform", action="store_true")
opt = parser.parse_args()

opt.manualSeed = random.randint(1, 10000)
random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

dataset = ModelNetDataset(root=opt.dataset, npoints=opt.num_points, split="train")
test_dataset = ModelNetDataset(root=opt.dataset, npoints=opt.num_points, split="test", data_augmentation=False)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True,  # label: AL301
                                         num_workers=int(opt.workers))
testdataloader = torch.utils.data.DataLoader(test_dataset, batch_size=opt.batchSize, shuffle=True,  # label: AL301
                                             num_workers=int(opt.workers))
num_classes = len(dataset.classes)
os.makedirs(opt.outf, exist_ok=True)

classifier = PointNetCls(k=num_classes, feature_transform=opt.feature_transform)
optimizer = optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999))
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
classifier.cuda()

num_batch = len(dataset) / opt.batchSize

for epoch in range(opt.nepoch):  # label: AL303
    for i, data in enumerate(dataloader, 0):  # label: AL403
        points, target = data
        target = target[:, 0]
        points = points.transpose(2, 1)
        points, target = points.cuda(), target.cuda()
        optimizer.zero_grad()
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        loss = F.nll_loss(pred, target)
        if opt.feature_transform:
            loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        optimizer.step()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.data).cpu().sum()  # label: AL401
        print("[%d: %d/%d] train loss: %f accuracy: %f" % (epoch, i, num_batch, loss.item(),  # label: AL401
                                                           correct.item() / float(opt.batchSize)))
    scheduler.step()

    total_correct = 0
    total_testset = 0
    with torch.no_grad():
        for points, target in testdataloader:
            target = target[:, 0]
            points, target = points.transpose(2, 1).cuda(), target.cuda()
            classifier = classifier.eval()
            pred, _, _ = classifier(points)
            pred_choice = pred.data.max(1)[1]
            total_correct += pred_choice.eq(target.data).cpu().sum().item()
            total_testset += points.size()[0]
    print("epoch %d test accuracy %f" % (epoch, total_correct / float(total_testset)))
    torch.save(classifier.state_dict(), "%s/cls_model_%d.pth" % (opt.outf, epoch))
