import copy

import torch


class EMAModel:
    """Exponential moving average of a model's parameters."""

    def __init__(self, parameters, decay=0.9999, min_decay=0.0, inv_gamma=1.0, power=2 / 3):
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.decay = decay
        self.min_decay = min_decay
        self.inv_gamma = inv_gamma
        self.power = power
        self.optimization_step = 0
        self.cur_decay_value = None

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - 1)
        if step <= 0:
            return 0.0
        cur = 1 - (1 + step / self.inv_gamma) ** -self.power
        return max(min(cur, self.decay), self.min_decay)

    @torch.no_grad()
    def step(self, parameters):
        self.optimization_step += 1
        decay = self.get_decay(self.optimization_step)
        self.cur_decay_value = decay
        one_minus_decay = 1 - decay
        for s_param, param in zip(self.shadow_params, parameters):
            if param.requires_grad:
                s_param.sub_(one_minus_decay * (s_param - param))
            else:
                s_param.copy_(param)

    def copy_to(self, parameters):
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.to(param.device).data)

    def to(self, device=None, dtype=None):
        self.shadow_params = [p.to(device=device, dtype=dtype) for p in self.shadow_params]
