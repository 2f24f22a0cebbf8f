"""The offline agent: a d3rlpy algorithm trained on a dataset's transitions, relabelled by the learned reward
before every training phase, on mini-batches drawn by its own generator (so a checkpoint resumes exactly)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm.auto import tqdm

from rlhp.errors import ArgumentError, ConfigError
from rlhp.offline.algorithm import OfflineAlgorithm, algorithm_config, d3rlpy_module
from rlhp.offline.transitions import Transitions
from rlhp.rewards import AgentReward
from rlhp.sources.base import Agent, AgentReport
from rlhp.sources.domains import check_learner


class Predictor:
    """The agent's greedy policy behind SB3's ``predict`` signature, for SB3's ``evaluate_policy``."""

    def __init__(self, learner: Any) -> None:
        self.learner = learner

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = False) -> tuple[np.ndarray, None]:
        """The greedy action for a batch of observations (offline policies are evaluated greedy)."""
        return self.learner.predict(np.asarray(observation, np.float32)), None


class OfflineAgent(Agent):
    """An offline RL agent trained on a fixed set of transitions, paid the reward it is given.

    Args:
        algorithm: the d3rlpy algorithm and its scaling (the agent group).
        transitions: the dataset's transitions.
        observation_space, action_space: the env's (Box) spaces, which the dataset was recorded in.
        reward: what the agent learns on: the learned reward net, or the env's own (the ceiling).
        seed: seeds the mini-batch generator.
    """

    def __init__(self, algorithm: OfflineAlgorithm, transitions: Transitions, observation_space: gym.Space,
                 action_space: gym.Space, reward: AgentReward, seed: int) -> None:
        if not isinstance(action_space, gym.spaces.Box) or not isinstance(observation_space, gym.spaces.Box):
            raise ConfigError("agent", f"({algorithm.name}) takes Box observations and continuous (Box) actions; "
                              f"this env has {observation_space} and {action_space}")
        check_learner(algorithm.learner, algorithm.device)
        d3rlpy = d3rlpy_module()
        self.spec, self.transitions, self.reward = algorithm, transitions, reward
        self.rng = np.random.default_rng(seed)
        try:
            config = algorithm_config(algorithm.name, **algorithm.learner)
        except ArgumentError as err:
            raise ConfigError("agent.name" if err.argument == "name" else f"agent.learner.{err.argument}",
                              err.problem) from None
        # d3rlpy's policies act in [-1, 1]; the env's bounds are mapped there and back.
        config = dataclasses.replace(config, action_scaler=d3rlpy.preprocessing.MinMaxActionScaler(
            minimum=action_space.low, maximum=action_space.high))
        if algorithm.normalize_observations:
            config = dataclasses.replace(config, observation_scaler=d3rlpy.preprocessing.StandardObservationScaler(
                mean=transitions.obs.mean(0), std=transitions.obs.std(0)))
        device = algorithm.device
        if device == "auto":
            device = "cuda:0" if torch.cuda.is_available() else "cpu:0"
        self.learner = config.create(device=device)
        self.learner.create_impl(observation_space.shape, int(np.prod(action_space.shape)))
        self.algorithm = Predictor(self.learner)
        # The next action within its episode (the last step's own where the episode ends): what SARSA-style
        # targets read.
        same = np.append(transitions.episode[1:] == transitions.episode[:-1], False)
        self.next_rows = np.arange(len(transitions)) + same

    @property
    def rollout_steps(self) -> int:
        """Offline training counts gradient steps, each whole."""
        return 1

    def step_weights(self, rounds: int) -> np.ndarray:
        """Every gradient step in the last round, on the reward learned from every label (an offline agent
        gathers no data, so training it earlier on a younger reward serves nothing)."""
        return np.eye(rounds)[-1]

    def rewards(self) -> np.ndarray:
        """Every transition's reward as the learner is paid it: relabelled by the current reward, offset (a learned
        reward only: the env's own offset is part of its task) and scaled as the agent's config says, float32."""
        data = self.transitions
        rewards = data.rewards(self.reward)
        if self.spec.reward_offset == "nonnegative" and not self.reward.reads_env_reward:
            rewards = rewards - rewards.min()
        if self.spec.reward_scaling == "return_range":
            rewards = rewards * (self.spec.return_range / max(data.return_range(rewards), 1e-8))
        return rewards.astype(np.float32)

    def train(self, steps: int) -> AgentReport:
        """``steps`` gradient steps on mini-batches of the transitions, relabelled first."""
        data = self.transitions
        rewards = self.rewards()[:, None]
        batch_size, ones = self.learner.config.batch_size, np.ones((self.learner.config.batch_size, 1), np.float32)
        d3rlpy = d3rlpy_module()
        for _ in tqdm(range(steps), desc=f"{self.spec.name} steps", unit="step", leave=False, dynamic_ncols=True,
                      mininterval=1.0):
            rows = self.rng.integers(0, len(data), batch_size)
            self.learner.update(d3rlpy.dataset.TransitionMiniBatch(
                observations=data.obs[rows], actions=data.acts[rows], rewards=rewards[rows],
                next_observations=data.next_obs[rows], next_actions=data.acts[self.next_rows[rows]],
                terminals=data.terminals[rows, None], intervals=ones, transitions=[]))
        return AgentReport(steps, np.zeros(0))

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """The agent's greedy action (an offline agent gathers no data, so it has no exploring policy)."""
        return self.algorithm.predict(obs)[0]

    def save(self, folder: str | Path) -> None:
        """Save as d3rlpy's ``agent.d3`` (``d3rlpy.load_learnable`` reads it)."""
        self.learner.save(str(Path(folder) / "agent.d3"))

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The weights of every network (checked for NaN after training)."""
        modules = self.learner.impl.modules
        for field in dataclasses.fields(modules):
            module = getattr(modules, field.name)
            if isinstance(module, torch.nn.Module):
                for name, p in module.named_parameters():
                    yield f"{field.name}.{name}", p

    def __getstate__(self) -> dict[str, Any]:
        # The transitions are read again from the dataset (see DatasetSource), not stored in checkpoints.
        return {k: v for k, v in self.__dict__.items() if k != "transitions"}
