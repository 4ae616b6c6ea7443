import argparse


class MonodepthOptions:
    def __init__(self):
        self.parser = argparse.ArgumentParser(description="Monodepth options")
        self.parser.add_argument("--data_path", default="kitti_data")
        self.parser.add_argument("--height", type=int, default=192)
        self.parser.add_argument("--width", type=int, default=640)
        self.parser.add_argument("--batch_size", type=int, default=12)
        self.parser.add_argument("--learning_rate", type=float, default=1e-4)
        self.parser.add_argument("--num_epochs", type=int, default=20)
        self.parser.add_argument("--num_workers", type=int, default=12)
        self.parser.add_argument("--log_frequency", type=int, default=250)
        self.parser.add_argument("--no_cuda", action="store_true")

    def parse(self):
        return self.parser.parse_args()
