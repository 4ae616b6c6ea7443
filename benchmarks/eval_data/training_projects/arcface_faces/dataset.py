"""Faces from an MXNet RecordIO file, decoded and augmented on the host."""
import numbers
import os

import numpy as np
import torch
from torch.utils.data import Dataset
from torchvision import transforms


class MXFaceDataset(Dataset):
    def __init__(self, root_dir, local_rank):
        import mxnet as mx
        self.transform = transforms.Compose([transforms.ToPILImage(), transforms.RandomHorizontalFlip(),
                                             transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.5] * 3)])
        self.imgrec = mx.recordio.MXIndexedRecordIO(os.path.join(root_dir, "train.idx"),
                                                    os.path.join(root_dir, "train.rec"), "r")
        header, _ = mx.recordio.unpack(self.imgrec.read_idx(0))
        self.imgidx = np.array(range(1, int(header.label[0]))) if header.flag > 0 else np.array(list(self.imgrec.keys))

    def __getitem__(self, index):
        import mxnet as mx
        header, img = mx.recordio.unpack(self.imgrec.read_idx(self.imgidx[index]))
        label = header.label if isinstance(header.label, numbers.Number) else header.label[0]
        sample = mx.image.imdecode(img).asnumpy()
        return self.transform(sample), torch.tensor(label, dtype=torch.long)

    def __len__(self):
        return len(self.imgidx)
