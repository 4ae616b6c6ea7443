import argparse
import os

import torch


def default_argument_parser():
    parser = argparse.ArgumentParser(description="minid2 training")
    parser.add_argument("--config-file", default="", metavar="FILE")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--eval-only", action="store_true")
    parser.add_argument("--num-gpus", type=int, default=1)
    return parser


def default_setup(cfg, args):
    os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
    torch.manual_seed(0)
    if not (hasattr(args, "eval_only") and args.eval_only):
        torch.backends.cudnn.benchmark = cfg.CUDNN_BENCHMARK
