"""Dataset package: create_dataset(opt) returns an iterable over batches."""
import torch.utils.data

from data.unaligned_dataset import UnalignedDataset


def create_dataset(opt):
    data_loader = CustomDatasetDataLoader(opt)
    return data_loader.load_data()


class CustomDatasetDataLoader:
    def __init__(self, opt):
        self.opt = opt
        self.dataset = UnalignedDataset(opt)
        self.dataloader = torch.utils.data.DataLoader(  # label: AL301
            self.dataset, batch_size=opt.batch_size, shuffle=not opt.serial_batches, num_workers=int(opt.num_threads))

    def load_data(self):
        return self

    def __len__(self):
        return len(self.dataset)

    def __iter__(self):
        for i, data in enumerate(self.dataloader):
            if i * self.opt.batch_size >= self.opt.max_dataset_size:
                break
            yield data
