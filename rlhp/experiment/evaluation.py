"""The final evaluation of a run: the policy's true return and the learned reward's fit to the true reward."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy

from rlhp.agents import Agent
from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data.trajectory import SUCCESS
from rlhp.envs import GymEnv
from rlhp.loop import Loop
from rlhp.rewards import RewardNet, reward_correlation
from rlhp.sources import TrajectorySource


def policy_return(algorithm: BaseAlgorithm, env: GymEnv, episodes: int, seed: int) -> dict[str, float]:
    """Mean and std of the true return over deterministic episodes on fresh envs, and the share of them that
    succeeded where the env says (``success_rate``: Meta-World's, success at any step of an episode)."""
    venv = env.make(seed, n_envs=min(episodes, env.n_envs))
    succeeded: list[bool] = []

    def note_success(locals_: dict[str, Any], _: dict[str, Any]) -> None:
        info = locals_["info"]
        if locals_["done"] and "episode" in info and SUCCESS in info:  # an episode evaluate_policy counts
            succeeded.append(bool(info[SUCCESS]))

    returns, _ = evaluate_policy(algorithm, venv, n_eval_episodes=episodes, deterministic=True,
                                 return_episode_rewards=True, callback=note_success)
    venv.close()
    result = {"true_return_mean": float(np.mean(returns)), "true_return_std": float(np.std(returns)),
              "episodes": episodes}
    if succeeded:
        result["success_rate"] = float(np.mean(succeeded))
    return result


def reward_fit(net: RewardNet, source: TrajectorySource, agent: Agent, env: GymEnv, steps: int,
               seed: int) -> dict[str, Any]:
    """Correlations of the learned and the true reward on ``steps`` fresh transitions, half a random
    policy's and half the source's held-out episodes, and on each alone (and on ``agent``'s, where it trains)."""
    venv = env.make(seed + 30_000)
    venv.action_space.seed(seed)
    random = rollout(venv, random_policy(venv.action_space), steps // 2, frame_stack=env.frame_stack)
    held_out = source.held_out(steps // 2)
    result = {"reward_correlation": reward_correlation(net, random + held_out),
              "correlation_transitions": sum(map(len, random + held_out)),
              # Where the reward can be trusted, each alone: held-out episodes of its source (the agent's own
              # for an agent trainer, unseen data for a dataset), a random policy's states, the agent's states.
              "reward_correlation_held_out": reward_correlation(net, held_out),
              "reward_correlation_random": reward_correlation(net, random)}
    if agent.trains:
        agent_episodes = rollout(venv, agent.policy, steps // 2, frame_stack=env.frame_stack)
        result["reward_correlation_agent"] = reward_correlation(net, agent_episodes)
    return result


def evaluate(loop: Loop, env: GymEnv, episodes: int, correlation_steps: int, seed: int) -> dict[str, Any]:
    """The final policy's true return (where an agent trains) and, where a reward was learned, its fit."""
    agent = loop.agent
    result: dict[str, Any] = policy_return(agent.algorithm, env, episodes, seed + 20_000) if agent.trains else {}
    result.update(loop.reward_learning.fit(lambda net: reward_fit(net, loop.source, agent, env,
                                                                             correlation_steps, seed)))
    return result


def headline(result: dict[str, Any]) -> str:
    """The final evaluation in one line for the console."""
    parts = []
    if "true_return_mean" in result:
        parts.append(f"true return {result['true_return_mean']:.1f} ± {result['true_return_std']:.1f} over "
                     f"{result['episodes']} episodes")
    if "success_rate" in result:
        parts.append(f"success {100 * result['success_rate']:.0f}%")
    if "reward_correlation" in result:
        corr = result["reward_correlation"]
        parts.append(f"reward correlation {'n/a' if corr is None else f'{corr:.3f}'}")
    return ", ".join(parts)
