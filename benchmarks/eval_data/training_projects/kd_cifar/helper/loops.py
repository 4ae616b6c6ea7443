import sys
import time

import torch

from .util import AverageMeter, accuracy


def train_distill(epoch, train_loader, module_list, criterion_list, optimizer, opt):
    for module in module_list:
        module.train()
    module_list[-1].eval()
    criterion_cls, criterion_div = criterion_list[0], criterion_list[1]
    model_s, model_t = module_list[0], module_list[-1]

    batch_time, losses, top1 = AverageMeter(), AverageMeter(), AverageMeter()
    end = time.time()
    for idx, (input, target) in enumerate(train_loader):  # label: AL403
        input = input.float()
        if torch.cuda.is_available():
            input = input.cuda()  # label: AL302
            target = target.cuda()  # label: AL302
        logit_s = model_s(input)
        with torch.no_grad():
            logit_t = model_t(input)
        loss_cls = criterion_cls(logit_s, target)
        loss_div = criterion_div(logit_s, logit_t)
        loss = opt.gamma * loss_cls + opt.alpha * loss_div
        acc1, acc5 = accuracy(logit_s, target, topk=(1, 5))
        losses.update(loss.item(), input.size(0))  # label: AL401
        top1.update(acc1[0], input.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
        if idx % opt.print_freq == 0:
            print("Epoch: [{0}][{1}/{2}]\tLoss {loss.val:.4f}\tAcc@1 {top1.val:.3f}".format(
                epoch, idx, len(train_loader), loss=losses, top1=top1))
            sys.stdout.flush()
    return top1.avg, losses.avg


def validate(val_loader, model, criterion, opt):
    losses, top1 = AverageMeter(), AverageMeter()
    model.eval()
    with torch.no_grad():
        for idx, (input, target) in enumerate(val_loader):
            input = input.float()
            if torch.cuda.is_available():
                input = input.cuda()  # label: AL302
                target = target.cuda()  # label: AL302
            output = model(input)
            loss = criterion(output, target)
            acc1, _ = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), input.size(0))
            top1.update(acc1[0], input.size(0))
    return top1.avg, losses.avg
