import os

import torch
from PIL import Image
from torchvision import transforms


class ImageFolderDataset(torch.utils.data.Dataset):
    def __init__(self, root, resolution, center_crop=False, random_flip=False):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root))
        self.transform = transforms.Compose([
            transforms.Resize(resolution, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.CenterCrop(resolution) if center_crop else transforms.RandomCrop(resolution),
            transforms.RandomHorizontalFlip() if random_flip else transforms.Lambda(lambda x: x),
            transforms.ToTensor(),
            transforms.Normalize([0.5], [0.5]),
        ])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        return {"input": self.transform(image)}


def get_train_dataloader(args):
    dataset = ImageFolderDataset(args.train_data_dir, args.resolution, args.center_crop, args.random_flip)
    return torch.utils.data.DataLoader(  # label: AL301
        dataset, batch_size=args.train_batch_size, shuffle=True, num_workers=args.dataloader_num_workers
    )
