from .KD import DistillKL
