import argparse


class TrainOptions:
    def parse(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--batch_size", type=int, default=1)
        parser.add_argument("--gpu_ids", type=lambda s: [int(x) for x in s.split(",")], default=[0])
        parser.add_argument("--num_threads", default=4, type=int)
        parser.add_argument("--serial_batches", action="store_true")
        parser.add_argument("--max_dataset_size", type=int, default=10**9)
        parser.add_argument("--lr", type=float, default=0.0002)
        parser.add_argument("--epoch_count", type=int, default=1)
        parser.add_argument("--n_epochs", type=int, default=100)
        parser.add_argument("--print_freq", type=int, default=100)
        return parser.parse_args()
