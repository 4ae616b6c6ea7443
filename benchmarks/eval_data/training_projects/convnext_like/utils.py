import math
from collections import defaultdict, deque

import torch
import torch.distributed as dist
from torch.utils.tensorboard import SummaryWriter


class SmoothedValue:
    def __init__(self, window_size=20, fmt=None):
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if v is None:
                continue
            if isinstance(v, torch.Tensor):
                v = v.item()  # label: AL401
            self.meters[k].update(v)

    def log_every(self, iterable, print_freq, header=None):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0:
                print(header, i)


class TensorboardLogger:
    def __init__(self, log_dir):
        self.writer = SummaryWriter(logdir=log_dir)
        self.step = 0

    def set_step(self, step=None):
        self.step = step if step is not None else self.step + 1

    def update(self, head="scalar", step=None, **kwargs):
        for k, v in kwargs.items():
            if v is None:
                continue
            if isinstance(v, torch.Tensor):
                v = v.item()  # label: AL401
            self.writer.add_scalar(head + "/" + k, v, self.step if step is None else step)


class NativeScalerWithGradNormCount:
    state_dict_key = "amp_scaler"

    def __init__(self):
        self._scaler = torch.cuda.amp.GradScaler()

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False, update_grad=True):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if update_grad:
            self._scaler.unscale_(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(parameters, clip_grad) if clip_grad is not None else None
            self._scaler.step(optimizer)
            self._scaler.update()
        else:
            norm = None
        return norm


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep):
    return [final_value + 0.5 * (base_value - final_value) * (1 + math.cos(math.pi * i / (epochs * niter_per_ep)))
            for i in range(epochs * niter_per_ep)]
