from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN, STD = (0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)


def get_cifar100_dataloaders(batch_size=128, num_workers=8):
    train_transform = transforms.Compose([
        transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(MEAN, STD)])
    test_transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    train_set = datasets.CIFAR100(root="./data", download=True, train=True, transform=train_transform)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                              pin_memory=True)
    test_set = datasets.CIFAR100(root="./data", download=True, train=False, transform=test_transform)
    test_loader = DataLoader(test_set, batch_size=batch_size // 2, shuffle=False, num_workers=num_workers // 2,
                             pin_memory=True)
    return train_loader, test_loader, len(train_set)
