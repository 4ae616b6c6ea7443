"""Small synthetic datasets the loader tests build: JPEG files written with PIL to a temp dir,
a module of Datasets/DataLoaders over them, and a model file with a width knob."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
from PIL import Image

N_IMAGES, SIZE = 240, 64

DATA = '''
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

ROOT = Path(__file__).parent / "images"
NUMBER = 3


class Folder(Dataset):
    """One JPEG per item from a directory listing, decoded with PIL, a v1 Compose."""

    def __init__(self, root=str(ROOT), size=48):
        self.files = sorted(Path(root).glob("*.jpg"))
        if not self.files:
            raise FileNotFoundError(f"no images under {root}")
        self.transform = T.Compose([T.Resize(56), T.CenterCrop(size), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = Image.open(self.files[i]).convert("RGB")
        return self.transform(img), i % 10


class FolderV2(Folder):
    """The same files through a torchvision.transforms.v2 pipeline (a class used twice)."""

    def __init__(self, root=str(ROOT)):
        super().__init__(root)
        self.transform = v2.Compose([
            v2.PILToTensor(), v2.Resize(56, antialias=True), v2.CenterCrop(48),
            v2.ToDtype(torch.float32, scale=True), v2.CenterCrop(40),
        ])


class Jitter:
    """A custom transform class (a __call__, no torchvision base)."""

    def __init__(self, amount=0.1):
        self.amount = amount

    def __call__(self, x):
        return x + self.amount * torch.randn_like(x)


class FolderTf(Dataset):
    """Keeps its pipeline under a name of its own (`self.tf`) and a custom step apart (`self.noise`)."""

    def __init__(self, root=str(ROOT)):
        self.files = sorted(Path(root).glob("*.jpg"))
        self.tf = T.Compose([T.Resize(56), T.CenterCrop(48), T.ToTensor()])
        self.noise = Jitter()
        self.labels = list(range(len(self.files)))  # data, not a transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = Image.open(self.files[i]).convert("RGB")
        return self.noise(self.tf(img)), self.labels[i] % 10


class Missing(Dataset):
    """Lists files that are not there: fails when an item is read."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        with open(ROOT / f"missing-{i}.jpg", "rb") as f:
            return f.read()


class Stream(torch.utils.data.IterableDataset):
    """An IterableDataset: no items to pick, so no stage breakdown."""

    def __iter__(self):
        for i in range(512):
            yield torch.full((3, 8, 8), float(i))


def folder_loader(batch_size=16, num_workers=0):
    return DataLoader(Folder(), batch_size=batch_size, num_workers=num_workers)


def needs_root(root):
    return Folder(root)


def fake_data(size=96):
    """torchvision's own FakeData: random PIL images made per item, a v1 pipeline."""
    return datasets.FakeData(size=size, image_size=(3, 64, 64), transform=T.Compose([T.RandomResizedCrop(48), T.ToTensor()]))


def image_folder():
    """torchvision's ImageFolder (its pil_loader opens each file with open(), then PIL)."""
    return datasets.ImageFolder(str(ROOT.parent / "classes"), transform=T.Compose([T.Resize(48), T.ToTensor()]))


stream = DataLoader(Stream(), batch_size=32)
tensors = DataLoader(TensorDataset(torch.randn(1024, 3, 8, 8), torch.arange(1024)), batch_size=64)
missing_in_worker = DataLoader(Missing(), batch_size=4, num_workers=1)
'''

NETS = '''
from torch import nn


class Net(nn.Module):
    """`depth` convolutions of `width` channels, then a linear head: depth=0 is next to free."""

    def __init__(self, depth=0, width=64):
        super().__init__()
        layers, c = [], 3
        for _ in range(depth):
            layers += [nn.Conv2d(c, width, 3, padding=1), nn.ReLU()]
            c = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))
'''


PIPES = '''
"""Pipelines wrapped in CUDA-stream prefetchers (the apex and timm patterns), and negative twins."""
import torch
from torch.utils.data import DataLoader

from data import Folder, folder_loader


class StreamPrefetcher:
    """apex's pattern: the stream is made and the first batch copied in __init__ (needs CUDA)."""

    def __init__(self, loader):
        self.batches = iter(loader)
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        images, labels = next(self.batches)
        with torch.cuda.stream(self.stream):
            self.images = images.cuda(non_blocking=True)

    def next(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        images = self.images
        images.record_stream(torch.cuda.current_stream())
        self.preload()
        return images


class LazyPrefetcher:
    """timm's pattern: holds the loader, makes its stream on first iteration."""

    def __init__(self, loader):
        self.loader = loader
        self.stream = None

    def __iter__(self):
        self.stream = self.stream or torch.cuda.Stream()
        for images, labels in self.loader:
            self.stream.wait_stream(torch.cuda.current_stream())
            yield images.cuda(non_blocking=True), labels


class IterPrefetcher(LazyPrefetcher):
    """apex's way of holding the loader (its iterator), timm's lazy stream: builds without CUDA."""

    def __init__(self, loader):
        self.batches = iter(loader)
        self.stream = None

    def __iter__(self):
        self.stream = self.stream or torch.cuda.Stream()
        for images, labels in self.batches:
            with torch.cuda.stream(self.stream):
                images = images.cuda(non_blocking=True)
            images.record_stream(torch.cuda.current_stream())
            yield images, labels


class Holder:
    """Holds a loader, no stream: not a prefetcher."""

    def __init__(self, loader):
        self.loader = loader


def apex_style():
    return StreamPrefetcher(folder_loader())


def lazy():
    return LazyPrefetcher(DataLoader(Folder(), batch_size=8, num_workers=1, prefetch_factor=3))


def timm_style():
    from timm.data.loader import PrefetchLoader

    return PrefetchLoader(folder_loader())


def iter_held():
    return IterPrefetcher(DataLoader(Folder(), batch_size=12, num_workers=2, prefetch_factor=4))


def holder():
    return Holder(folder_loader())


def pinned_workers():
    return DataLoader(Folder(), batch_size=16, num_workers=2, pin_memory=True, prefetch_factor=3)
'''


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("loader")
    images = root / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(N_IMAGES):
        pixels = (rng.random((SIZE, SIZE, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(images / f"{i:04d}.jpg", quality=90)
    for i in range(24):  # an ImageFolder layout: one folder per class
        folder = root / "classes" / "ab"[i % 2]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.jpg").write_bytes((images / f"{i:04d}.jpg").read_bytes())
    (root / "data.py").write_text(textwrap.dedent(DATA))
    (root / "nets.py").write_text(textwrap.dedent(NETS))
    (root / "pipes.py").write_text(textwrap.dedent(PIPES))
    return root


@pytest.fixture
def one_thread():
    """Tiny models are timed with one intra-op thread: on a busy 2-core machine, two threads
    wait on each other for tens of ms per op, which would hide what the tests compare."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
