"""General-purpose training script for image-to-image translation."""
import time

from data import create_dataset
from models import create_model
from options import TrainOptions

if __name__ == "__main__":
    opt = TrainOptions().parse()
    dataset = create_dataset(opt)
    model = create_model(opt)
    total_iters = 0
    for epoch in range(opt.epoch_count, opt.n_epochs + 1):
        epoch_start_time = time.time()
        for i, data in enumerate(dataset):  # label: AL403
            total_iters += opt.batch_size
            model.set_input(data)
            model.optimize_parameters()
            if total_iters % opt.print_freq == 0:
                losses = model.get_current_losses()
                print(epoch, total_iters, losses)
