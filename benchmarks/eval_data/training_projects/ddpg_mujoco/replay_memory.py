"""A ring buffer of transitions kept as NumPy arrays on the host."""
import numpy as np


class ReplayMemory:
    def __init__(self, capacity, obs_dim, act_dim):
        self.capacity, self.ptr, self.size = capacity, 0, 0
        self.state = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.action = np.zeros((capacity, act_dim), dtype=np.float32)
        self.reward = np.zeros((capacity, 1), dtype=np.float32)
        self.next_state = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.done = np.zeros((capacity, 1), dtype=np.float32)

    def push(self, s, a, r, s2, d):
        i = self.ptr
        self.state[i], self.action[i], self.reward[i], self.next_state[i], self.done[i] = s, a, r, s2, d
        self.ptr = (self.ptr + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size):
        idx = np.random.randint(0, self.size, size=batch_size)
        return self.state[idx], self.action[idx], self.reward[idx], self.next_state[idx], self.done[idx]
