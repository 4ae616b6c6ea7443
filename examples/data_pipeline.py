"""Example data pipelines for `archlint loader` (nothing here writes a file).

    archlint loader examples/data_pipeline.py:synthetic_loader --model examples/nets.py:TinyNet
    archlint loader examples/data_pipeline.py:JpegFolder --init root=path/to/jpegs --batch-size 64

`JpegFolder` is the common pattern: one file per item from a directory listing, decoded with PIL,
then a torchvision Compose. `synthetic_loader()` runs the same decode and pipeline on JPEGs it
encodes in memory, so that it runs anywhere.
"""

import io
from pathlib import Path

import numpy as np
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T

TRAIN_TRANSFORM = T.Compose([
    T.RandomResizedCrop(56),
    T.RandomHorizontalFlip(),
    T.ToTensor(),
    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])


class JpegFolder(Dataset):
    """One JPEG per item from a directory listing (labels: the parent folder's name)."""

    def __init__(self, root: str, transform=TRAIN_TRANSFORM):
        self.files = sorted(Path(root).rglob("*.jpg"))
        if not self.files:
            raise FileNotFoundError(f"no .jpg files under {root}")
        self.classes = sorted({f.parent.name for f in self.files})
        self.transform = transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path = self.files[i]
        image = Image.open(path).convert("RGB")
        return self.transform(image), self.classes.index(path.parent.name)


class InMemoryJpegs(Dataset):
    """Random images JPEG-encoded once in memory, decoded with PIL per item."""

    def __init__(self, n: int = 512, size: int = 96, transform=TRAIN_TRANSFORM):
        rng = np.random.default_rng(0)
        self.blobs = []
        for _ in range(n):
            buffer = io.BytesIO()
            Image.fromarray((rng.random((size, size, 3)) * 255).astype("uint8")).save(buffer, "JPEG", quality=90)
            self.blobs.append(buffer.getvalue())
        self.transform = transform

    def __len__(self):
        return len(self.blobs)

    def __getitem__(self, i):
        image = Image.open(io.BytesIO(self.blobs[i])).convert("RGB")
        return self.transform(image), i % 10


def synthetic_loader(batch_size: int = 32, num_workers: int = 0):
    return DataLoader(InMemoryJpegs(), batch_size=batch_size, shuffle=True, num_workers=num_workers)
