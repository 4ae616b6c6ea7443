"""DQN on an Atari game, in the layout of a single-agent RL repository (agent.py, replay.py, train.py)."""
import argparse
import time

import gymnasium as gym
import numpy as np
import torch

from agent import DQNAgent
from replay import ReplayBuffer


def linear_schedule(start_e, end_e, duration, t):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--total-timesteps", type=int, default=10_000_000)
    parser.add_argument("--buffer-size", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-starts", type=int, default=80_000)
    parser.add_argument("--target-network-frequency", type=int, default=1000)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = gym.make(args.env_id)
    agent = DQNAgent(env.action_space.n, device)
    buffer = ReplayBuffer(args.buffer_size, (4, 84, 84))

    obs, _ = env.reset(seed=1)
    episode_return, start = 0.0, time.time()
    for global_step in range(args.total_timesteps):  # label: AL403
        epsilon = linear_schedule(1.0, 0.01, 0.1 * args.total_timesteps, global_step)
        action = agent.act(obs, epsilon)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer.add(obs, next_obs, action, reward, terminated)
        episode_return += reward
        obs = next_obs
        if terminated or truncated:
            print(f"step={global_step} return={episode_return}")
            obs, _ = env.reset()
            episode_return = 0.0
        if global_step > args.learning_starts:
            loss, q_mean = agent.learn(buffer.sample(args.batch_size))
            if global_step % 100 == 0:
                print(f"loss={loss:.4f} q={q_mean:.3f} sps={int(global_step / (time.time() - start))}")
            if global_step % args.target_network_frequency == 0:
                agent.sync_target()
    env.close()


if __name__ == "__main__":  # label: AL303
    main()
