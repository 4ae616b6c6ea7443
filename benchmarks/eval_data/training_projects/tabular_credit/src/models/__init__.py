from .mlp import MLP
from .tcn import TemporalConvNet

__all__ = ["MLP", "TemporalConvNet"]
