import os

import torch
from torchvision import datasets, transforms


def build_transform(is_train, config):
    if is_train:
        return transforms.Compose([
            transforms.RandomResizedCrop(config.DATA.IMG_SIZE),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ])
    return transforms.Compose([
        transforms.Resize(int(config.DATA.IMG_SIZE / 0.875)),
        transforms.CenterCrop(config.DATA.IMG_SIZE),
        transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ])


def build_loader(config):
    dataset_train = datasets.ImageFolder(os.path.join(config.DATA.DATA_PATH, "train"), build_transform(True, config))
    dataset_val = datasets.ImageFolder(os.path.join(config.DATA.DATA_PATH, "val"), build_transform(False, config))
    sampler_train = torch.utils.data.DistributedSampler(dataset_train, shuffle=True)
    sampler_val = torch.utils.data.distributed.DistributedSampler(dataset_val, shuffle=False)
    data_loader_train = torch.utils.data.DataLoader(
        dataset_train, sampler=sampler_train,
        batch_size=config.DATA.BATCH_SIZE,
        num_workers=config.DATA.NUM_WORKERS,
        pin_memory=config.DATA.PIN_MEMORY,
        drop_last=True,
    )
    data_loader_val = torch.utils.data.DataLoader(
        dataset_val, sampler=sampler_val,
        batch_size=config.DATA.BATCH_SIZE,
        shuffle=False,
        num_workers=config.DATA.NUM_WORKERS,
        pin_memory=config.DATA.PIN_MEMORY,
        drop_last=False,
    )
    return dataset_train, dataset_val, data_loader_train, data_loader_val
