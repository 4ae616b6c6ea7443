import numpy as np
import torch


def adjust_learning_rate(optimizer, epoch, args):
    lr = args.learning_rate * (0.5 ** (epoch - 1))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


class EarlyStopping:
    def __init__(self, patience=7):
        self.patience = patience
        self.counter = 0
        self.best_score = None
        self.early_stop = False
        self.val_loss_min = np.inf

    def __call__(self, val_loss, model, path):
        score = -val_loss
        if self.best_score is None or score > self.best_score:
            self.best_score = score
            torch.save(model.state_dict(), path + "/checkpoint.pth")
            self.counter = 0
        else:
            self.counter += 1
            self.early_stop = self.counter >= self.patience
