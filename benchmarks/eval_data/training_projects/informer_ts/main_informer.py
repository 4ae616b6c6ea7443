"""Long-sequence time-series forecasting (ETTh1) in the layout of an Informer-style repository."""
import argparse

import torch

from exp.exp_informer import Exp_Informer

if __name__ == "__main__":  # label: AL303
    parser = argparse.ArgumentParser(description="[Informer] Long Sequences Forecasting")
    parser.add_argument("--root_path", type=str, default="./data/ETT/")
    parser.add_argument("--seq_len", type=int, default=96)
    parser.add_argument("--label_len", type=int, default=48)
    parser.add_argument("--pred_len", type=int, default=24)
    parser.add_argument("--enc_in", type=int, default=7)
    parser.add_argument("--dec_in", type=int, default=7)
    parser.add_argument("--c_out", type=int, default=7)
    parser.add_argument("--d_model", type=int, default=512)
    parser.add_argument("--n_heads", type=int, default=8)
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--train_epochs", type=int, default=6)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--learning_rate", type=float, default=0.0001)
    parser.add_argument("--use_amp", action="store_true", default=False)
    parser.add_argument("--use_gpu", type=bool, default=True)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--checkpoints", type=str, default="./checkpoints/")
    parser.add_argument("--itr", type=int, default=2)
    args = parser.parse_args()
    args.use_gpu = bool(torch.cuda.is_available() and args.use_gpu)
    for ii in range(args.itr):
        setting = "informer_ETTh1_sl{}_ll{}_pl{}_{}".format(args.seq_len, args.label_len, args.pred_len, ii)
        exp = Exp_Informer(args)
        exp.train(setting)
        torch.cuda.empty_cache()
