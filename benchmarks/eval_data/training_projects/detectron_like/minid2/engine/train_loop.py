import logging
import time
import weakref

import numpy as np
import torch

logger = logging.getLogger(__name__)


class HookBase:
    trainer = None

    def before_train(self):
        pass

    def after_train(self):
        pass

    def before_step(self):
        pass

    def after_step(self):
        pass


class TrainerBase:
    """Runs hooks around an abstract run_step(); subclasses implement the step."""

    def __init__(self):
        self._hooks = []
        self.iter = 0
        self.start_iter = 0
        self.max_iter = 0
        self.storage = {}

    def register_hooks(self, hooks):
        for h in hooks:
            if h is not None:
                h.trainer = weakref.proxy(self)
                self._hooks.append(h)

    def train(self, start_iter: int, max_iter: int):
        logger.info("Starting training from iteration %d", start_iter)
        self.iter = self.start_iter = start_iter
        self.max_iter = max_iter
        self.before_train()
        try:
            for self.iter in range(start_iter, max_iter):  # label: AL403
                self.before_step()
                self.run_step()
                self.after_step()
            self.iter += 1
        finally:
            self.after_train()

    def before_train(self):
        for h in self._hooks:
            h.before_train()

    def after_train(self):
        for h in self._hooks:
            h.after_train()

    def before_step(self):
        for h in self._hooks:
            h.before_step()

    def after_step(self):
        for h in self._hooks:
            h.after_step()

    def run_step(self):
        raise NotImplementedError


class SimpleTrainer(TrainerBase):
    def __init__(self, model, data_loader, optimizer):
        super().__init__()
        model.train()
        self.model = model
        self.data_loader = data_loader
        self._data_loader_iter = iter(data_loader)
        self.optimizer = optimizer

    def run_step(self):
        assert self.model.training, "[SimpleTrainer] model was changed to eval mode!"
        start = time.perf_counter()
        data = next(self._data_loader_iter)
        data_time = time.perf_counter() - start

        loss_dict = self.model(data)
        if isinstance(loss_dict, torch.Tensor):
            losses = loss_dict
            loss_dict = {"total_loss": loss_dict}
        else:
            losses = sum(loss_dict.values())
        self._detect_anomaly(losses, loss_dict)

        self.optimizer.zero_grad()
        losses.backward()
        self._write_metrics(loss_dict, data_time)
        self.optimizer.step()

    def _detect_anomaly(self, losses, loss_dict):
        if not torch.isfinite(losses).all():  # label: AL401
            raise FloatingPointError(
                "Loss became infinite or NaN at iteration={}!\nloss_dict = {}".format(self.iter, loss_dict))

    def _write_metrics(self, loss_dict, data_time: float):
        metrics_dict = {k: v.detach().cpu().item() for k, v in loss_dict.items()}  # label: AL401
        metrics_dict["data_time"] = data_time
        total_losses_reduced = sum(metrics_dict.values())
        if not np.isfinite(total_losses_reduced):
            raise FloatingPointError(f"Loss became infinite or NaN at iteration={self.iter}!")
        self.storage.setdefault("total_loss", []).append(total_losses_reduced)
        for k, v in metrics_dict.items():
            self.storage.setdefault(k, []).append(v)
