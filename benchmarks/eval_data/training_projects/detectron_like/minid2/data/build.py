import itertools

import torch
import torch.utils.data as torchdata


class DetectionDataset(torchdata.Dataset):
    def __init__(self, n=1000):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        return {"image": torch.rand(3, 512, 512), "boxes": torch.rand(4, 4), "classes": torch.zeros(4, dtype=torch.long)}


class TrainingSampler(torchdata.Sampler):
    def __init__(self, size, shuffle=True, seed=0):
        self._size = size
        self._shuffle = shuffle
        self._seed = seed

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self._seed)
        while True:
            if self._shuffle:
                yield from torch.randperm(self._size, generator=g).tolist()
            else:
                yield from torch.arange(self._size).tolist()


def trivial_batch_collator(batch):
    return batch


def build_detection_train_loader(cfg, dataset=None):
    dataset = dataset if dataset is not None else DetectionDataset()
    sampler = TrainingSampler(len(dataset))
    batch_sampler = torchdata.BatchSampler(sampler, cfg.SOLVER.IMS_PER_BATCH, drop_last=True)
    return torchdata.DataLoader(  # label: AL301
        dataset,
        num_workers=cfg.DATALOADER.NUM_WORKERS,
        batch_sampler=batch_sampler,
        collate_fn=trivial_batch_collator,
    )
