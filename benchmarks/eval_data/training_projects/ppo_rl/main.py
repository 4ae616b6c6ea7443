"""PPO on Atari in the layout of a pytorch a2c/ppo/acktr repository: algo/, storage, model, envs."""
import argparse
import time
from collections import deque

import numpy as np
import torch

from a2c_ppo import algo
from a2c_ppo.envs import make_vec_envs
from a2c_ppo.model import Policy
from a2c_ppo.storage import RolloutStorage


def get_args():
    parser = argparse.ArgumentParser(description="RL")
    parser.add_argument("--env-name", default="PongNoFrameskip-v4")
    parser.add_argument("--lr", type=float, default=2.5e-4)
    parser.add_argument("--eps", type=float, default=1e-5)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--gae-lambda", type=float, default=0.95)
    parser.add_argument("--num-processes", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--ppo-epoch", type=int, default=4)
    parser.add_argument("--num-mini-batch", type=int, default=4)
    parser.add_argument("--clip-param", type=float, default=0.1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--num-env-steps", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--cuda-deterministic", action="store_true", default=False)
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    return args


def main():
    args = get_args()
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    if args.cuda and args.cuda_deterministic:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    torch.set_num_threads(1)
    device = torch.device("cuda:0" if args.cuda else "cpu")

    envs = make_vec_envs(args.env_name, args.seed, args.num_processes, device)
    actor_critic = Policy(envs.observation_space.shape, envs.action_space.n)
    actor_critic.to(device)
    agent = algo.PPO(actor_critic, args.clip_param, args.ppo_epoch, args.num_mini_batch, 0.5, 0.01,
                     lr=args.lr, eps=args.eps, max_grad_norm=0.5)

    rollouts = RolloutStorage(args.num_steps, args.num_processes, envs.observation_space.shape)
    obs = envs.reset()
    rollouts.obs[0].copy_(obs)
    rollouts.to(device)

    episode_rewards = deque(maxlen=10)
    start = time.time()
    num_updates = int(args.num_env_steps) // args.num_steps // args.num_processes
    for j in range(num_updates):
        for step in range(args.num_steps):
            with torch.no_grad():
                value, action, action_log_prob = actor_critic.act(rollouts.obs[step], rollouts.masks[step])
            obs, reward, done, infos = envs.step(action)
            for info in infos.get("episode", {}).get("r", []):
                episode_rewards.append(info)
            masks = torch.FloatTensor([[0.0] if done_ else [1.0] for done_ in done])
            rollouts.insert(obs, action, action_log_prob, value, reward, masks)

        with torch.no_grad():
            next_value = actor_critic.get_value(rollouts.obs[-1], rollouts.masks[-1]).detach()
        rollouts.compute_returns(next_value, args.gamma, args.gae_lambda)
        value_loss, action_loss, dist_entropy = agent.update(rollouts)
        rollouts.after_update()

        if j % args.log_interval == 0 and len(episode_rewards) > 1:
            total_num_steps = (j + 1) * args.num_processes * args.num_steps
            print("Updates {}, num timesteps {}, FPS {} \n Last {} training episodes: mean/median reward {:.1f}/{:.1f}"
                  .format(j, total_num_steps, int(total_num_steps / (time.time() - start)), len(episode_rewards),
                          np.mean(episode_rewards), np.median(episode_rewards)))
            print("value loss {:.3f}, action loss {:.3f}, entropy {:.3f}".format(value_loss, action_loss, dist_entropy))


if __name__ == "__main__":
    main()
