from .focal import FocalLoss, WeightedBCE
