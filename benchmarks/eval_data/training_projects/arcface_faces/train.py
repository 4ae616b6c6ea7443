"""Face-recognition training with a margin softmax, in the layout of an insightface-style repository
(train.py, losses.py, dataset.py, backbones/, utils/)."""
import argparse
import logging

import torch
from torch.utils.data import DataLoader

from backbones import get_model
from dataset import MXFaceDataset
from losses import ArcFace, CombinedMarginLoss, CosFace
from utils.utils_logging import AverageMeter


def main(args):
    torch.cuda.set_device(args.local_rank)
    train_set = MXFaceDataset(root_dir=args.rec, local_rank=args.local_rank)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.num_workers, pin_memory=True, drop_last=True)
    backbone = get_model(args.network, fp16=args.fp16, num_features=args.embedding_size).cuda()
    if args.loss == "arcface":
        margin_loss = ArcFace(s=64.0, margin=0.5)
    elif args.loss == "cosface":
        margin_loss = CosFace(s=64.0, m=0.4)
    else:
        margin_loss = CombinedMarginLoss(64.0, 1.0, 0.5, 0.0)
    weight = torch.nn.Parameter(torch.normal(0, 0.01, (args.num_classes, args.embedding_size), device="cuda"))
    opt = torch.optim.SGD([{"params": backbone.parameters()}, {"params": [weight]}], lr=args.lr,
                          momentum=0.9, weight_decay=5e-4)
    amp = torch.cuda.amp.GradScaler(growth_interval=100)
    loss_am = AverageMeter()
    global_step = 0
    for epoch in range(args.num_epoch):
        for _, (img, local_labels) in enumerate(train_loader):
            global_step += 1
            img = img.cuda()  # label: AL302
            local_labels = local_labels.view(-1).cuda()  # label: AL302
            with torch.cuda.amp.autocast(args.fp16):
                embeddings = backbone(img)
            norm_embeddings = torch.nn.functional.normalize(embeddings.float())
            logits = torch.nn.functional.linear(norm_embeddings, torch.nn.functional.normalize(weight))
            loss = margin_loss(logits, local_labels)
            amp.scale(loss).backward()
            amp.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(backbone.parameters(), 5)
            amp.step(opt)
            amp.update()
            opt.zero_grad()
            loss_am.update(loss.item(), 1)  # label: AL401
            if global_step % args.frequent == 0:
                logging.info("epoch %d step %d loss %.4f", epoch, global_step, loss_am.avg)
                loss_am.reset()
        torch.save(backbone.state_dict(), f"{args.output}/model_{epoch}.pt")


if __name__ == "__main__":  # label: AL303
    parser = argparse.ArgumentParser()
    parser.add_argument("--rec", default="/train_tmp/faces_emore")
    parser.add_argument("--network", default="r50")
    parser.add_argument("--loss", default="arcface", choices=["arcface", "cosface", "combined"])
    parser.add_argument("--num_classes", type=int, default=85742)
    parser.add_argument("--embedding_size", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--num_epoch", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--frequent", type=int, default=10)
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--local_rank", type=int, default=0)
    parser.add_argument("--output", default="work_dirs/r50")
    main(parser.parse_args())
