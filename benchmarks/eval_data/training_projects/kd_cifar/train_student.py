"""Knowledge distillation of a small CIFAR-100 student from a trained teacher (vanilla KD)."""
import argparse
import os

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torchvision

from dataset.cifar100 import get_cifar100_dataloaders
from distiller_zoo import DistillKL
from helper.loops import train_distill, validate


def parse_option():
    parser = argparse.ArgumentParser("argument for training")
    parser.add_argument("--print_freq", type=int, default=100)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_workers", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=240)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--path_t", type=str, required=True)
    parser.add_argument("--kd_T", type=float, default=4)
    parser.add_argument("-r", "--gamma", type=float, default=0.1)
    parser.add_argument("-a", "--alpha", type=float, default=0.9)
    return parser.parse_args()


def main():
    opt = parse_option()
    train_loader, val_loader, n_data = get_cifar100_dataloaders(batch_size=opt.batch_size,
                                                                num_workers=opt.num_workers)
    model_t = torchvision.models.resnet50(num_classes=100)
    model_t.load_state_dict(torch.load(opt.path_t)["model"])
    model_s = torchvision.models.resnet18(num_classes=100)
    module_list = nn.ModuleList([model_s, model_t])
    criterion_list = nn.ModuleList([nn.CrossEntropyLoss(), DistillKL(opt.kd_T)])
    optimizer = optim.SGD(model_s.parameters(), lr=opt.learning_rate, momentum=0.9, weight_decay=5e-4)
    if torch.cuda.is_available():
        module_list.cuda()
        criterion_list.cuda()
        cudnn.benchmark = True
    best_acc = 0
    for epoch in range(1, opt.epochs + 1):
        train_acc, train_loss = train_distill(epoch, train_loader, module_list, criterion_list, optimizer, opt)
        test_acc, test_loss = validate(val_loader, model_s, criterion_list[0], opt)
        if test_acc > best_acc:
            best_acc = test_acc
            torch.save({"model": model_s.state_dict(), "epoch": epoch}, os.path.join("save", "student_best.pth"))
    print("best accuracy:", best_acc)


if __name__ == "__main__":
    main()
