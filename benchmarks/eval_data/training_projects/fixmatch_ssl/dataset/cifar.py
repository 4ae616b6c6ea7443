"""CIFAR-10 split into labelled and unlabelled sets; weak and strong augmentation of the unlabelled."""
import numpy as np
from torchvision import datasets, transforms

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2471, 0.2435, 0.2616)


class TransformFixMatch:
    def __init__(self):
        self.weak = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.RandomCrop(32, 4, padding_mode="reflect")])
        self.strong = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.RandAugment(2, 10)])
        self.normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])

    def __call__(self, x):
        return self.normalize(self.weak(x)), self.normalize(self.strong(x))


class CIFAR10SSL(datasets.CIFAR10):
    def __init__(self, root, indexs, train=True, transform=None):
        super().__init__(root, train=train, transform=transform, download=True)
        if indexs is not None:
            self.data, self.targets = self.data[indexs], np.array(self.targets)[indexs]

    def __getitem__(self, index):
        img, target = super().__getitem__(index)
        return img, target, index


def get_cifar10(args, root):
    base = datasets.CIFAR10(root, train=True, download=True)
    labels = np.array(base.targets)
    labeled_idx = np.concatenate([np.random.choice(np.where(labels == c)[0], args.num_labeled // 10, False)
                                  for c in range(10)])
    train_labeled = datasets.CIFAR10(root, train=True, transform=transforms.Compose(
        [transforms.RandomHorizontalFlip(), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]))
    train_labeled.data, train_labeled.targets = base.data[labeled_idx], labels[labeled_idx]
    train_unlabeled = CIFAR10SSL(root, np.arange(len(labels)), train=True, transform=TransformFixMatch())
    test = datasets.CIFAR10(root, train=False, transform=transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]))
    return train_labeled, train_unlabeled, test
