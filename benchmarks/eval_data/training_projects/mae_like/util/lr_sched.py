import math


def adjust_learning_rate(optimizer, epoch, args):
    lr = args.lr * 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    return lr
