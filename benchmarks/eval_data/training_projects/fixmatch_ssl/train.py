"""Semi-supervised image classification (FixMatch with flexible thresholds), in the layout of a
semi-supervised repository (train.py, models/, dataset/)."""
import argparse
from collections import Counter

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from dataset.cifar import get_cifar10
from models.wideresnet import build_wideresnet


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train(args, labeled_loader, unlabeled_loader, test_loader, model, optimizer):
    labeled_iter, unlabeled_iter = iter(labeled_loader), iter(unlabeled_loader)
    selected_label = torch.ones((len(unlabeled_loader.dataset),), dtype=torch.long, device=args.device) * -1
    classwise_acc = torch.zeros((args.num_classes,), device=args.device)
    losses, mask_probs = AverageMeter(), AverageMeter()
    for epoch in range(args.epochs):
        model.train()
        for batch_idx in range(args.eval_step):  # label: AL403
            try:
                inputs_x, targets_x = next(labeled_iter)
            except StopIteration:
                labeled_iter = iter(labeled_loader)
                inputs_x, targets_x = next(labeled_iter)
            try:
                (inputs_u_w, inputs_u_s), _, idx = next(unlabeled_iter)
            except StopIteration:
                unlabeled_iter = iter(unlabeled_loader)
                (inputs_u_w, inputs_u_s), _, idx = next(unlabeled_iter)
            batch_size = inputs_x.shape[0]
            inputs = torch.cat((inputs_x, inputs_u_w, inputs_u_s)).to(args.device)
            targets_x = targets_x.to(args.device)
            idx = idx.to(args.device)
            logits = model(inputs)
            logits_x = logits[:batch_size]
            logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
            Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")

            pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            pseudo_counter = Counter(selected_label.tolist())  # label: AL401
            if max(pseudo_counter.values()) < len(selected_label):
                for i in range(args.num_classes):
                    classwise_acc[i] = pseudo_counter[i] / max(pseudo_counter.values())
            select = max_probs.ge(args.threshold * (classwise_acc[targets_u] / (2.0 - classwise_acc[targets_u])))
            if idx[select].nelement() != 0:  # label: AL401
                selected_label[idx[select]] = targets_u[select]  # label: AL401
            mask = select.float()
            Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
            loss = Lx + args.lambda_u * Lu
            loss.backward()
            losses.update(loss.item())  # label: AL401
            mask_probs.update(mask.mean().item())  # label: AL401
            optimizer.step()
            model.zero_grad()
        test(args, test_loader, model)


def test(args, test_loader, model):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for inputs, targets in test_loader:
            inputs, targets = inputs.to(args.device), targets.to(args.device)
            outputs = model(inputs)
            correct += (outputs.argmax(1) == targets).sum().item()
            total += targets.numel()
    print(f"top-1 acc {100.0 * correct / total:.2f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-labeled", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mu", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=1024)
    parser.add_argument("--eval-step", type=int, default=1024)
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--lambda-u", type=float, default=1.0)
    parser.add_argument("--T", type=float, default=1.0)
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--num-classes", type=int, default=10)
    args = parser.parse_args()
    args.device = torch.device("cuda", 0)

    labeled_set, unlabeled_set, test_set = get_cifar10(args, "./data")
    labeled_loader = DataLoader(labeled_set, sampler=RandomSampler(labeled_set), batch_size=args.batch_size,  # label: AL301
                                num_workers=args.num_workers, drop_last=True)
    unlabeled_loader = DataLoader(unlabeled_set, sampler=RandomSampler(unlabeled_set),  # label: AL301
                                  batch_size=args.batch_size * args.mu, num_workers=args.num_workers, drop_last=True)
    test_loader = DataLoader(test_set, sampler=SequentialSampler(test_set), batch_size=args.batch_size,  # label: AL301
                             num_workers=args.num_workers)
    model = build_wideresnet(depth=28, widen_factor=2, num_classes=args.num_classes).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True)
    train(args, labeled_loader, unlabeled_loader, test_loader, model, optimizer)


if __name__ == "__main__":  # label: AL303
    main()
