"""Swin-style ImageNet training: config object, build_loader/build_model, loss scaler, meters."""
import argparse
import datetime
import time

import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist

from config import get_config
from data import build_loader
from models import build_model
from utils import AverageMeter, NativeScalerWithGradNormCount, reduce_tensor


def parse_option():
    parser = argparse.ArgumentParser("Swin Transformer training and evaluation script", add_help=False)
    parser.add_argument("--data-path", type=str)
    parser.add_argument("--local_rank", type=int, default=0)
    args, _ = parser.parse_known_args()
    return args, get_config(args)


def main(config):
    dataset_train, dataset_val, data_loader_train, data_loader_val = build_loader(config)
    model = build_model(config)
    model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.TRAIN.BASE_LR, weight_decay=0.05)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[config.LOCAL_RANK], broadcast_buffers=False)
    loss_scaler = NativeScalerWithGradNormCount()
    criterion = torch.nn.CrossEntropyLoss()
    start_time = time.time()
    for epoch in range(config.TRAIN.EPOCHS):
        data_loader_train.sampler.set_epoch(epoch)
        train_one_epoch(config, model, criterion, data_loader_train, optimizer, epoch, loss_scaler)
        validate(config, data_loader_val, model)
    print("Training time {}".format(str(datetime.timedelta(seconds=int(time.time() - start_time)))))


def train_one_epoch(config, model, criterion, data_loader, optimizer, epoch, loss_scaler):
    model.train()
    optimizer.zero_grad()
    num_steps = len(data_loader)
    batch_time = AverageMeter()
    loss_meter = AverageMeter()
    norm_meter = AverageMeter()
    start = time.time()
    end = time.time()
    for idx, (samples, targets) in enumerate(data_loader):
        samples = samples.cuda(non_blocking=True)
        targets = targets.cuda(non_blocking=True)

        with torch.amp.autocast("cuda", enabled=config.AMP_ENABLE):
            outputs = model(samples)
        loss = criterion(outputs, targets)
        loss = loss / config.TRAIN.ACCUMULATION_STEPS

        is_second_order = hasattr(optimizer, "is_second_order") and optimizer.is_second_order
        grad_norm = loss_scaler(loss, optimizer, clip_grad=config.TRAIN.CLIP_GRAD, parameters=model.parameters(),
                                create_graph=is_second_order,
                                update_grad=(idx + 1) % config.TRAIN.ACCUMULATION_STEPS == 0)
        if (idx + 1) % config.TRAIN.ACCUMULATION_STEPS == 0:
            optimizer.zero_grad()

        torch.cuda.synchronize()  # label: AL401

        loss_meter.update(loss.item(), targets.size(0))  # label: AL401
        if grad_norm is not None:
            norm_meter.update(grad_norm)
        batch_time.update(time.time() - end)
        end = time.time()

        if idx % config.PRINT_FREQ == 0:
            lr = optimizer.param_groups[0]["lr"]
            memory_used = torch.cuda.max_memory_allocated() / (1024.0 * 1024.0)
            print(f"Train: [{epoch}/{config.TRAIN.EPOCHS}][{idx}/{num_steps}]\t"
                  f"lr {lr:.6f}\tloss {loss_meter.val:.4f} ({loss_meter.avg:.4f})\t"
                  f"grad_norm {norm_meter.val:.4f} ({norm_meter.avg:.4f})\tmem {memory_used:.0f}MB")
    epoch_time = time.time() - start
    print(f"EPOCH {epoch} training takes {datetime.timedelta(seconds=int(epoch_time))}")


@torch.no_grad()
def validate(config, data_loader, model):
    criterion = torch.nn.CrossEntropyLoss()
    model.eval()
    loss_meter = AverageMeter()
    for idx, (images, target) in enumerate(data_loader):
        images = images.cuda(non_blocking=True)
        target = target.cuda(non_blocking=True)
        with torch.amp.autocast("cuda", enabled=config.AMP_ENABLE):
            output = model(images)
        loss = criterion(output, target)
        loss = reduce_tensor(loss)
        loss_meter.update(loss.item(), target.size(0))
    return loss_meter.avg


if __name__ == "__main__":
    args, config = parse_option()
    config.LOCAL_RANK = args.local_rank
    torch.cuda.set_device(config.LOCAL_RANK)
    dist.init_process_group(backend="nccl", init_method="env://")
    torch.manual_seed(0)
    cudnn.benchmark = True
    main(config)
