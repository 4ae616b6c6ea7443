"""Semantic segmentation training in the layout of torchvision's reference scripts."""
import datetime
import os
import time

import torch
import torch.utils.data
import torchvision
from torch import nn

import presets
import utils


def get_dataset(args, is_train):
    transform = presets.SegmentationPresetTrain(base_size=520, crop_size=480) if is_train \
        else presets.SegmentationPresetEval(base_size=520)
    image_set = "train" if is_train else "val"
    return torchvision.datasets.VOCSegmentation(args.data_path, image_set=image_set, transforms=transform), 21


def criterion(inputs, target):
    losses = {}
    for name, x in inputs.items():
        losses[name] = nn.functional.cross_entropy(x, target, ignore_index=255)
    if len(losses) == 1:
        return losses["out"]
    return losses["out"] + 0.5 * losses["aux"]


def evaluate(model, data_loader, device, num_classes):
    model.eval()
    confmat = utils.ConfusionMatrix(num_classes)
    metric_logger = utils.MetricLogger(delimiter="  ")
    with torch.inference_mode():
        for image, target in metric_logger.log_every(data_loader, 100, "Test:"):
            image, target = image.to(device), target.to(device)
            output = model(image)["out"]
            confmat.update(target.flatten(), output.argmax(1).flatten())
    return confmat


def train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, device, epoch, print_freq, scaler=None):
    model.train()
    metric_logger = utils.MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", utils.SmoothedValue(window_size=1, fmt="{value}"))
    header = f"Epoch: [{epoch}]"
    for image, target in metric_logger.log_every(data_loader, print_freq, header):
        image, target = image.to(device), target.to(device)
        with torch.amp.autocast("cuda", enabled=scaler is not None):
            output = model(image)
            loss = criterion(output, target)

        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()

        lr_scheduler.step()
        metric_logger.update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"])  # label: AL401


def main(args):
    utils.init_distributed_mode(args)
    device = torch.device(args.device)
    if args.use_deterministic_algorithms:
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True)
    else:
        torch.backends.cudnn.benchmark = True

    dataset, num_classes = get_dataset(args, is_train=True)
    dataset_test, _ = get_dataset(args, is_train=False)
    if args.distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(dataset)
        test_sampler = torch.utils.data.distributed.DistributedSampler(dataset_test, shuffle=False)
    else:
        train_sampler = torch.utils.data.RandomSampler(dataset)
        test_sampler = torch.utils.data.SequentialSampler(dataset_test)

    data_loader = torch.utils.data.DataLoader(  # label: AL301
        dataset, batch_size=args.batch_size, sampler=train_sampler, num_workers=args.workers,
        collate_fn=utils.collate_fn, drop_last=True,
    )
    data_loader_test = torch.utils.data.DataLoader(  # label: AL301
        dataset_test, batch_size=1, sampler=test_sampler, num_workers=args.workers, collate_fn=utils.collate_fn
    )

    model = torchvision.models.get_model(args.model, weights=None, num_classes=num_classes, aux_loss=args.aux_loss)
    model.to(device)
    params_to_optimize = [{"params": [p for p in model.backbone.parameters() if p.requires_grad]},
                          {"params": [p for p in model.classifier.parameters() if p.requires_grad]}]
    optimizer = torch.optim.SGD(params_to_optimize, lr=args.lr, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda") if args.amp else None
    iters_per_epoch = len(data_loader)
    lr_scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, total_iters=iters_per_epoch * args.epochs, power=0.9)

    start_time = time.time()
    for epoch in range(args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, device, epoch, args.print_freq, scaler)
        confmat = evaluate(model, data_loader_test, device=device, num_classes=num_classes)
        torch.save({"model": model.state_dict(), "epoch": epoch}, os.path.join(args.output_dir, "checkpoint.pth"))
    print(f"Training time {datetime.timedelta(seconds=int(time.time() - start_time))}")


def get_args_parser(add_help=True):
    import argparse

    parser = argparse.ArgumentParser(description="PyTorch Segmentation Training", add_help=add_help)
    parser.add_argument("--data-path", default="/datasets01/COCO/022719/", type=str)
    parser.add_argument("--model", default="fcn_resnet101", type=str)
    parser.add_argument("--aux-loss", action="store_true")
    parser.add_argument("--device", default="cuda", type=str)
    parser.add_argument("-b", "--batch-size", default=8, type=int)
    parser.add_argument("--epochs", default=30, type=int)
    parser.add_argument("-j", "--workers", default=16, type=int)
    parser.add_argument("--lr", default=0.01, type=float)
    parser.add_argument("--print-freq", default=10, type=int)
    parser.add_argument("--output-dir", default=".", type=str)
    parser.add_argument("--use-deterministic-algorithms", action="store_true")
    parser.add_argument("--amp", action="store_true")
    return parser


if __name__ == "__main__":
    main(get_args_parser().parse_args())
