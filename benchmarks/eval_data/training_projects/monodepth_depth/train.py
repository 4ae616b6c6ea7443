"""Self-supervised monocular depth, in the layout of a depth-estimation repository
(train.py, trainer.py, options.py, networks/, datasets.py)."""
from options import MonodepthOptions
from trainer import Trainer

options = MonodepthOptions()
opts = options.parse()

if __name__ == "__main__":  # label: AL303
    trainer = Trainer(opts)
    trainer.train()
