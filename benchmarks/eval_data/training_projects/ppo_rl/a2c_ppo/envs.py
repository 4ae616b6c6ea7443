import gymnasium as gym
import numpy as np
import torch


class VecPyTorch:
    """Wraps a vectorised env so that observations and rewards are tensors on the device."""

    def __init__(self, venv, device):
        self.venv = venv
        self.device = device
        self.observation_space = venv.single_observation_space
        self.action_space = venv.single_action_space

    def reset(self):
        obs, _ = self.venv.reset()
        return torch.from_numpy(obs).float().to(self.device)

    def step(self, actions):
        actions = actions.squeeze(1).cpu().numpy()
        obs, reward, terminated, truncated, infos = self.venv.step(actions)
        obs = torch.from_numpy(obs).float().to(self.device)
        reward = torch.from_numpy(reward).unsqueeze(dim=1).float()
        return obs, reward, np.logical_or(terminated, truncated), infos


def make_vec_envs(env_name, seed, num_processes, device):
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(env_name) for _ in range(num_processes)])
    venv.reset(seed=seed)
    return VecPyTorch(venv, device)
