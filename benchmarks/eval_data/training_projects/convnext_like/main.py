import argparse

import torch
import torch.backends.cudnn as cudnn
from timm.models import create_model

import utils
from engine import evaluate, train_one_epoch
from utils import NativeScalerWithGradNormCount as NativeScaler


def get_args_parser():
    parser = argparse.ArgumentParser("ConvNeXt training and evaluation script", add_help=False)
    parser.add_argument("--batch_size", default=64, type=int)
    parser.add_argument("--epochs", default=300, type=int)
    parser.add_argument("--update_freq", default=1, type=int)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num_workers", default=10, type=int)
    parser.add_argument("--pin_mem", type=bool, default=True)
    parser.add_argument("--use_amp", type=bool, default=False)
    parser.add_argument("--log_dir", default=None)
    return parser


def main(args):
    device = torch.device(args.device)
    cudnn.benchmark = True
    from torchvision import datasets, transforms
    dataset_train = datasets.ImageFolder("train", transform=transforms.ToTensor())
    dataset_val = datasets.ImageFolder("val", transform=transforms.ToTensor())
    data_loader_train = torch.utils.data.DataLoader(dataset_train, batch_size=args.batch_size,
                                                    num_workers=args.num_workers, pin_memory=args.pin_mem,
                                                    drop_last=True)
    data_loader_val = torch.utils.data.DataLoader(dataset_val, batch_size=int(1.5 * args.batch_size),
                                                  num_workers=args.num_workers, pin_memory=args.pin_mem)
    model = create_model("convnext_tiny", pretrained=False, num_classes=1000)
    model.to(device)
    log_writer = utils.TensorboardLogger(log_dir=args.log_dir) if args.log_dir else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-3)
    loss_scaler = NativeScaler()
    criterion = torch.nn.CrossEntropyLoss()
    num_training_steps_per_epoch = len(dataset_train) // args.batch_size
    schedule = utils.cosine_scheduler(4e-3, 1e-6, args.epochs, num_training_steps_per_epoch)
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, data_loader_train, optimizer, device, epoch, loss_scaler,
                        log_writer=log_writer, start_steps=epoch * num_training_steps_per_epoch,
                        lr_schedule_values=schedule, num_training_steps_per_epoch=num_training_steps_per_epoch,
                        update_freq=args.update_freq, use_amp=args.use_amp)
        evaluate(data_loader_val, model, device, use_amp=args.use_amp)


if __name__ == "__main__":
    parser = argparse.ArgumentParser("ConvNeXt training and evaluation script", parents=[get_args_parser()])
    main(parser.parse_args())
