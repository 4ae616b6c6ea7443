"""Neural collaborative filtering (NeuMF) on MovieLens, in the layout of a reimplementation repository."""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data

import data_utils
import evaluate
import model

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.001)
parser.add_argument("--batch_size", type=int, default=256)
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--top_k", type=int, default=10)
parser.add_argument("--factor_num", type=int, default=32)
parser.add_argument("--num_layers", type=int, default=3)
parser.add_argument("--num_ng", type=int, default=4)
parser.add_argument("--test_num_ng", type=int, default=99)
parser.add_argument("--gpu", type=str, default="0")
args = parser.parse_args()
os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu

train_data, test_data, user_num, item_num, train_mat = data_utils.load_all("data/ml-1m.train.rating",
                                                                           "data/ml-1m.test.negative")
train_dataset = data_utils.NCFData(train_data, item_num, train_mat, args.num_ng, True)
test_dataset = data_utils.NCFData(test_data, item_num, train_mat, 0, False)
train_loader = data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=4)  # label: AL301
test_loader = data.DataLoader(test_dataset, batch_size=args.test_num_ng + 1, shuffle=False, num_workers=0)  # label: AL301 AL304

ncf = model.NCF(user_num, item_num, args.factor_num, args.num_layers)
ncf.cuda()
loss_function = nn.BCEWithLogitsLoss()
optimizer = optim.Adam(ncf.parameters(), lr=args.lr)

best_hr = 0
for epoch in range(args.epochs):
    ncf.train()
    start_time = time.time()
    train_loader.dataset.ng_sample()
    for user, item, label in train_loader:  # label: AL403
        user = user.cuda()
        item = item.cuda()
        label = label.float().cuda()
        ncf.zero_grad()
        prediction = ncf(user, item)
        loss = loss_function(prediction, label)
        loss.backward()
        optimizer.step()
    ncf.eval()
    HR, NDCG = evaluate.metrics(ncf, test_loader, args.top_k)
    elapsed = time.time() - start_time
    print("epoch {:03d} took {:.1f}s  HR={:.3f}  NDCG={:.3f}".format(epoch, elapsed, HR, NDCG))
    if HR > best_hr:
        best_hr = HR
        torch.save(ncf, "NeuMF.pth")
