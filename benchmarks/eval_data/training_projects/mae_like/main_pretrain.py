import argparse

import torch
import torch.backends.cudnn as cudnn
import torchvision.datasets as datasets
import torchvision.transforms as transforms

import util.misc as misc
from engine_pretrain import train_one_epoch
from util.misc import NativeScalerWithGradNormCount as NativeScaler


def get_args_parser():
    parser = argparse.ArgumentParser("MAE pre-training", add_help=False)
    parser.add_argument("--batch_size", default=64, type=int)
    parser.add_argument("--epochs", default=400, type=int)
    parser.add_argument("--accum_iter", default=1, type=int)
    parser.add_argument("--mask_ratio", default=0.75, type=float)
    parser.add_argument("--lr", type=float, default=1.5e-4)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num_workers", default=10, type=int)
    parser.add_argument("--pin_mem", action="store_true")
    parser.set_defaults(pin_mem=True)
    return parser


def main(args):
    device = torch.device(args.device)
    cudnn.benchmark = True
    transform_train = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    dataset_train = datasets.ImageFolder("train", transform=transform_train)
    sampler_train = torch.utils.data.RandomSampler(dataset_train)
    data_loader_train = torch.utils.data.DataLoader(
        dataset_train, sampler=sampler_train, batch_size=args.batch_size, num_workers=args.num_workers,
        pin_memory=args.pin_mem, drop_last=True)
    model = torch.nn.Linear(3, 3)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95))
    loss_scaler = NativeScaler()
    for epoch in range(args.epochs):
        train_one_epoch(model, data_loader_train, optimizer, device, epoch, loss_scaler, args=args)


if __name__ == "__main__":
    args = get_args_parser().parse_args()
    main(args)
