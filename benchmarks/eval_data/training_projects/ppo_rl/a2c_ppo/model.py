import torch
import torch.nn as nn


class Categorical(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()
        self.linear = nn.Linear(num_inputs, num_outputs)

    def forward(self, x):
        return torch.distributions.Categorical(logits=self.linear(x))


class CNNBase(nn.Module):
    def __init__(self, num_inputs, hidden_size=512):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(num_inputs, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 32, 3, stride=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(32 * 7 * 7, hidden_size), nn.ReLU())
        self.critic_linear = nn.Linear(hidden_size, 1)

    def forward(self, inputs, masks):
        x = self.main(inputs / 255.0)
        return self.critic_linear(x), x


class Policy(nn.Module):
    def __init__(self, obs_shape, num_actions):
        super().__init__()
        self.base = CNNBase(obs_shape[0])
        self.dist = Categorical(512, num_actions)

    def act(self, inputs, masks, deterministic=False):
        value, actor_features = self.base(inputs, masks)
        dist = self.dist(actor_features)
        action = dist.probs.argmax(dim=-1, keepdim=True) if deterministic else dist.sample().unsqueeze(-1)
        return value, action, dist.log_prob(action.squeeze(-1)).unsqueeze(-1)

    def get_value(self, inputs, masks):
        value, _ = self.base(inputs, masks)
        return value

    def evaluate_actions(self, inputs, masks, action):
        value, actor_features = self.base(inputs, masks)
        dist = self.dist(actor_features)
        action_log_probs = dist.log_prob(action.squeeze(-1)).unsqueeze(-1)
        return value, action_log_probs, dist.entropy().mean()
