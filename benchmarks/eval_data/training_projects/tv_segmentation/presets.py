import torch
import torchvision.transforms.v2 as T
from torchvision import tv_tensors


class SegmentationPresetTrain:
    def __init__(self, *, base_size, crop_size, hflip_prob=0.5, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)):
        self.transforms = T.Compose([
            T.RandomResize(min_size=int(0.5 * base_size), max_size=int(2.0 * base_size)),
            T.RandomHorizontalFlip(hflip_prob),
            T.RandomCrop(crop_size),
            T.PILToTensor(),
            T.ToDtype(torch.float, scale=True),
            T.Normalize(mean=mean, std=std),
            T.ToPureTensor(),
        ])

    def __call__(self, img, target):
        return self.transforms(img, tv_tensors.Mask(target))


class SegmentationPresetEval:
    def __init__(self, *, base_size, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)):
        self.transforms = T.Compose([
            T.Resize(base_size),
            T.PILToTensor(),
            T.ToDtype(torch.float, scale=True),
            T.Normalize(mean=mean, std=std),
            T.ToPureTensor(),
        ])

    def __call__(self, img, target):
        return self.transforms(img, tv_tensors.Mask(target))
