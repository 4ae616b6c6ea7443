"""A Nature-DQN agent: online and target Q-networks, epsilon-greedy acting, Huber TD loss."""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class QNetwork(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, n_actions))

    def forward(self, x):
        return self.net(x / 255.0)


class DQNAgent:
    def __init__(self, n_actions, device, lr=1e-4, gamma=0.99):
        self.device = device
        self.n_actions = n_actions
        self.gamma = gamma
        self.q_net = QNetwork(n_actions).to(device)
        self.target_net = QNetwork(n_actions).to(device)
        self.target_net.load_state_dict(self.q_net.state_dict())
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=lr)

    def act(self, obs, epsilon):
        if random.random() < epsilon:
            return random.randrange(self.n_actions)
        with torch.no_grad():
            q_values = self.q_net(torch.tensor(np.array(obs)[None], dtype=torch.float32).to(self.device))
        return q_values.argmax(dim=1).item()

    def learn(self, batch):
        obs, actions, rewards, next_obs, dones = batch
        obs = torch.tensor(obs, dtype=torch.float32).to(self.device)
        next_obs = torch.tensor(next_obs, dtype=torch.float32).to(self.device)
        actions = torch.tensor(actions).to(self.device)
        rewards = torch.tensor(rewards).to(self.device)
        dones = torch.tensor(dones).to(self.device)
        with torch.no_grad():
            target_max = self.target_net(next_obs).max(dim=1)[0]
            td_target = rewards + self.gamma * target_max * (1 - dones)
        old_val = self.q_net(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(old_val, td_target)
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.q_net.parameters(), 10.0)
        self.optimizer.step()
        return loss.item(), old_val.mean().item()  # label: AL401

    def sync_target(self):
        self.target_net.load_state_dict(self.q_net.state_dict())
