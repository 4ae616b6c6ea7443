import time

import torch

from .train_loop import HookBase


class IterationTimer(HookBase):
    def __init__(self, warmup_iter=3):
        self._warmup_iter = warmup_iter
        self._step_start = None
        self.times = []

    def before_step(self):
        self._step_start = time.perf_counter()

    def after_step(self):
        iter_done = self.trainer.iter - self.trainer.start_iter + 1
        if iter_done >= self._warmup_iter:
            self.times.append(time.perf_counter() - self._step_start)


class PeriodicWriter(HookBase):
    def __init__(self, period=20):
        self._period = period

    def after_step(self):
        if (self.trainer.iter + 1) % self._period == 0 or self.trainer.iter == self.trainer.max_iter - 1:
            latest = {k: v[-1] for k, v in self.trainer.storage.items()}
            print(" ".join(f"{k}: {v:.4g}" for k, v in latest.items()))


class PeriodicCheckpointer(HookBase):
    def __init__(self, model, output_dir, period):
        self.model = model
        self.output_dir = output_dir
        self.period = period

    def after_step(self):
        if (self.trainer.iter + 1) % self.period == 0:
            torch.save(self.model.state_dict(), f"{self.output_dir}/model_{self.trainer.iter:07d}.pth")
