"""ImageNet training script in the style of timm's train.py (AMP, loader factory from the library)."""
import argparse
import time
from contextlib import suppress
from functools import partial

import torch
import torch.nn as nn
from timm import utils
from timm.data import create_dataset, create_loader
from timm.models import create_model

parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
parser.add_argument("--model", default="resnet50")
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--epochs", type=int, default=300)
parser.add_argument("--amp", action="store_true", default=False)
parser.add_argument("--amp-dtype", default="float16")
parser.add_argument("--pin-mem", action="store_true", default=False)
parser.add_argument("--workers", type=int, default=4)
parser.add_argument("--log-interval", type=int, default=50)
parser.add_argument("--synchronize-step", action="store_true", default=False)
parser.add_argument("--device", default="cuda")


def main():
    args = parser.parse_args()
    args.distributed = False
    torch.backends.cudnn.benchmark = True
    device = torch.device(args.device)
    model = create_model(args.model, pretrained=False)
    model.to(device=device)
    amp_autocast = suppress
    loss_scaler = None
    if args.amp:
        amp_dtype = torch.bfloat16 if args.amp_dtype == "bfloat16" else torch.float16
        amp_autocast = partial(torch.autocast, device_type=device.type, dtype=amp_dtype)
        loss_scaler = utils.NativeScaler()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset_train = create_dataset("imagenet", root="data", split="train", is_training=True)
    loader_train = create_loader(dataset_train, input_size=(3, 224, 224), batch_size=args.batch_size,
                                 is_training=True, num_workers=args.workers, pin_memory=args.pin_mem, device=device)
    train_loss_fn = nn.CrossEntropyLoss().to(device=device)
    for epoch in range(args.epochs):
        train_one_epoch(epoch, model, loader_train, optimizer, train_loss_fn, args, device=device,
                        amp_autocast=amp_autocast, loss_scaler=loss_scaler)


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, device=torch.device("cuda"),
                    amp_autocast=suppress, loss_scaler=None):
    losses_m = utils.AverageMeter()
    model.train()
    end = time.time()
    last_idx = len(loader) - 1
    for batch_idx, (input, target) in enumerate(loader):
        last_batch = batch_idx == last_idx
        input, target = input.to(device=device), target.to(device=device)
        with amp_autocast():
            output = model(input)
            loss = loss_fn(output, target)
        if loss_scaler is not None:
            loss_scaler(loss, optimizer, parameters=model.parameters())
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad()
        if not args.distributed:
            losses_m.update(loss.item(), input.size(0))  # label: AL401
        if args.synchronize_step and device.type == "cuda":
            torch.cuda.synchronize()
        if last_batch or batch_idx % args.log_interval == 0:
            print(f"Train: {epoch} [{batch_idx:>4d}/{len(loader)}] Loss: {losses_m.val:#.3g} ({losses_m.avg:#.3g})")
        end = time.time()
    return losses_m.avg


if __name__ == "__main__":
    main()
