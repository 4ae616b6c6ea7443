"""DDPG on a MuJoCo task, in the layout of a small continuous-control repository
(main.py, ddpg.py, replay_memory.py)."""
import argparse

import gymnasium as gym
import torch
from tqdm import trange

from ddpg import DDPG
from replay_memory import ReplayMemory


def evaluate(agent, env_id, episodes=5):
    env = gym.make(env_id)
    total = 0.0
    for _ in range(episodes):
        state, _ = env.reset()
        done = False
        while not done:
            state, reward, terminated, truncated, _ = env.step(agent.select_action(state, noise=False))
            total += reward
            done = terminated or truncated
    return total / episodes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--start-steps", type=int, default=10_000)
    parser.add_argument("--update-every", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--verbose", type=int, default=0)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = gym.make(args.env)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    agent, memory = DDPG(obs_dim, act_dim, device), ReplayMemory(1_000_000, obs_dim, act_dim)

    state, _ = env.reset(seed=0)
    for T in trange(args.steps):  # label: AL403
        if T < args.start_steps:
            action = env.action_space.sample()
        else:
            action = agent.select_action(state)
        next_state, reward, terminated, truncated, _ = env.step(action)
        memory.push(state, action, reward, next_state, float(terminated))
        state = next_state
        if terminated or truncated:
            state, _ = env.reset()
        if T >= args.start_steps and T % args.update_every == 0:
            critic_loss, actor_loss = agent.update(memory.sample(args.batch_size))
            if args.verbose > 1:
                print(f"T={T} critic={critic_loss:.3f} actor={actor_loss:.3f}")
        if (T + 1) % 5000 == 0:
            print(f"T={T + 1} eval return {evaluate(agent, args.env):.1f}")


if __name__ == "__main__":
    main()
