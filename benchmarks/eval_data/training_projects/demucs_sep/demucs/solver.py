"""The training loop: random remixing, L1 on the waveforms, gradient norm, moving averages."""
import logging

import torch
import torch.nn.functional as F
from tqdm import tqdm

from .utils import EMA, apply_model

logger = logging.getLogger(__name__)


class Solver:
    def __init__(self, loaders, model, optimizer, args, device):
        self.loaders, self.model, self.optimizer, self.args, self.device = loaders, model, optimizer, args, device

    def train(self):
        for epoch in range(self.args.epochs):
            metrics = self._run_one_epoch(epoch)
            logger.info("train epoch %d: %s", epoch, metrics)
            with torch.no_grad():
                valid = self._validate()
            logger.info("valid epoch %d: nsdr %.3f", epoch, valid)
            torch.save(self.model.state_dict(), "checkpoint.th")

    def _check_finite(self, **losses):
        for name, value in losses.items():
            if not torch.isfinite(value).all():  # label: AL401
                raise FloatingPointError(f"{name} is not finite")

    def _run_one_epoch(self, epoch):
        self.model.train()
        averager = EMA()
        logprog = tqdm(self.loaders["train"], desc=f"epoch {epoch}")
        for idx, sources in enumerate(logprog):  # label: AL403
            sources = sources.to(self.device)
            perm = torch.argsort(torch.rand(sources.shape[:2], device=sources.device), dim=1)
            sources = torch.gather(sources, 1, perm[..., None, None].expand_as(sources))
            mix = sources.sum(dim=1)
            estimate = self.model(mix)
            reco = F.l1_loss(estimate, sources, reduction="none").mean(dim=(0, 2, 3))
            loss = reco.mean()
            losses = {"loss": loss, "reco": reco.mean()}
            self._check_finite(**losses)
            loss.backward()
            grad_norm = 0
            for p in self.model.parameters():
                if p.grad is not None:
                    grad_norm += p.grad.data.norm() ** 2
            losses["grad"] = grad_norm ** 0.5
            self.optimizer.step()
            self.optimizer.zero_grad()
            metrics = averager.update(losses)
            if self.args.plot:
                logprog.set_postfix(loss=f"{losses['loss'].item():.4f}", grad=f"{losses['grad'].item():.3f}")
        return metrics

    def _validate(self):
        self.model.eval()
        total, count = 0.0, 0
        for mix, references in self.loaders["valid"]:
            mix, references = mix.to(self.device), references.to(self.device)
            estimates = apply_model(self.model, mix)
            delta = ((references - estimates) ** 2).sum() + 1e-8
            total += (10 * torch.log10((references ** 2).sum() / delta)).item()
            count += 1
        return total / max(count, 1)
