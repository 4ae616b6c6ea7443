"""Detection training script in the layout of a detectron-style engine: hooks around run_step()."""
import torch

from minid2.config.defaults import get_cfg
from minid2.data import build_detection_train_loader
from minid2.engine import (IterationTimer, PeriodicCheckpointer, PeriodicWriter, SimpleTrainer,
                           default_argument_parser, default_setup)
from minid2.modeling import build_model


def setup(args):
    cfg = get_cfg()
    default_setup(cfg, args)
    return cfg


def main(args):
    cfg = setup(args)
    model = build_model(cfg)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.SOLVER.BASE_LR, momentum=0.9, weight_decay=1e-4)
    data_loader = build_detection_train_loader(cfg)
    trainer = SimpleTrainer(model, data_loader, optimizer)
    trainer.register_hooks([
        IterationTimer(),
        PeriodicCheckpointer(model, cfg.OUTPUT_DIR, cfg.SOLVER.CHECKPOINT_PERIOD),
        PeriodicWriter(),
    ])
    trainer.train(0, cfg.SOLVER.MAX_ITER)


if __name__ == "__main__":
    args = default_argument_parser().parse_args()
    main(args)
