"""Deterministic actor, Q critic, target networks with Polyak averaging."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=256):
        super().__init__()
        self.l1 = nn.Linear(obs_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, act_dim)

    def forward(self, s):
        return torch.tanh(self.l3(F.relu(self.l2(F.relu(self.l1(s))))))


class Critic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=256):
        super().__init__()
        self.l1 = nn.Linear(obs_dim + act_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, 1)

    def forward(self, s, a):
        return self.l3(F.relu(self.l2(F.relu(self.l1(torch.cat([s, a], 1))))))


class DDPG:
    def __init__(self, obs_dim, act_dim, device, gamma=0.99, tau=0.005):
        self.device = device
        self.gamma, self.tau = gamma, tau
        self.actor = Actor(obs_dim, act_dim).to(device)
        self.critic = Critic(obs_dim, act_dim).to(device)
        self.actor_target = copy.deepcopy(self.actor)
        self.critic_target = copy.deepcopy(self.critic)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=3e-4)

    def select_action(self, state, noise=True):
        state = torch.as_tensor(state, dtype=torch.float32, device=self.device).unsqueeze(0)
        with torch.no_grad():
            action = self.actor(state).cpu().numpy()[0]
        if noise:
            action = action + 0.1 * np.random.randn(*action.shape)
        return np.clip(action, -1.0, 1.0)

    def update(self, batch):
        state, action, reward, next_state, done = [
            torch.as_tensor(b, dtype=torch.float32, device=self.device) for b in batch]
        with torch.no_grad():
            target_q = reward + self.gamma * (1 - done) * self.critic_target(next_state, self.actor_target(next_state))
        critic_loss = F.mse_loss(self.critic(state, action), target_q)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()

        actor_loss = -self.critic(state, self.actor(state)).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        for net, target in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
            for p, tp in zip(net.parameters(), target.parameters()):
                tp.data.mul_(1 - self.tau).add_(self.tau * p.data)
        return critic_loss.item(), actor_loss.item()  # label: AL401
