"""Final evaluation: the policy's true return and the learned reward's fit to the true reward."""

from __future__ import annotations

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy

from rlhp.data import Trajectory
from rlhp.envs import GymEnv
from rlhp.rewards import RewardNet


def policy_return(algorithm: BaseAlgorithm, env: GymEnv, episodes: int, seed: int) -> dict[str, float]:
    """Mean and std of the true return over deterministic episodes on fresh envs."""
    venv = env.make(seed, n_envs=min(episodes, env.n_envs))
    returns, _ = evaluate_policy(algorithm, venv, n_eval_episodes=episodes, deterministic=True,
                                 return_episode_rewards=True)
    venv.close()
    return {"true_return_mean": float(np.mean(returns)), "true_return_std": float(np.std(returns)),
            "episodes": episodes}


@torch.no_grad()
def reward_correlation(reward_net: RewardNet, trajectories: list[Trajectory]) -> float | None:
    """Pearson correlation of the (member-mean) learned reward with the true reward per transition."""
    obs = np.concatenate([t.obs[:-1] for t in trajectories])
    next_obs = np.concatenate([t.obs[1:] for t in trajectories])
    acts = np.concatenate([t.acts for t in trajectories])
    dones = np.concatenate([np.arange(len(t)) == len(t) - 1 if t.terminal else np.zeros(len(t), bool)
                            for t in trajectories])
    true = np.concatenate([t.rews for t in trajectories])
    inputs = (torch.as_tensor(a, device=reward_net.device) for a in (obs, acts, next_obs, dones))
    learned = reward_net(*inputs).mean(0).cpu().numpy()
    if true.std() == 0 or learned.std() == 0:
        return None
    return float(np.corrcoef(learned, true)[0, 1])
