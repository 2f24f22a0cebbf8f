"""The offline agent: a learner (IQL, TD3+BC in JAX) trained on a dataset's transitions, relabelled by the learned
reward before every training phase, on mini-batches drawn by its own generator (so a checkpoint resumes exactly)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm.auto import tqdm

from rlhp.agents.base import Agent, AgentReport
from rlhp.agents.domains import check_learner
from rlhp.errors import ArgumentError, ConfigError
from rlhp.offline.algorithm import OfflineAlgorithm, check_settings, learner_class
from rlhp.offline.scaling import Scaling
from rlhp.offline.transitions import Transitions
from rlhp.rewards import AgentReward

CHUNK = 500
"""Gradient steps a compiled call (the progress bar moves by this many)."""


class Predictor:
    """The agent's greedy policy behind SB3's ``predict`` signature, for SB3's ``evaluate_policy``."""

    def __init__(self, learner: Any, scaling: Scaling) -> None:
        self.learner, self.scaling = learner, scaling

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = False) -> tuple[np.ndarray, None]:
        """The greedy action for a batch of observations (offline policies are evaluated greedy)."""
        return self.scaling.to_env(self.learner.predict(self.scaling.obs(observation))), None


class OfflineAgent(Agent):
    """An offline RL agent trained on a fixed set of transitions, paid the reward it is given.

    Args:
        algorithm: the learner and its scaling (the agent group).
        transitions: the dataset's transitions.
        observation_space, action_space: the env's (Box) spaces, which the dataset was recorded in.
        reward: what the agent learns on: the learned reward net, or the env's own (the ceiling).
        seed: seeds the learner's first weights and the mini-batch generator.
    """

    unsaved = frozenset({"transitions"})
    """Not in a checkpoint: the transitions, read again from the dataset when the run resumes (see DatasetSource)."""

    def __init__(self, algorithm: OfflineAlgorithm, transitions: Transitions, observation_space: gym.Space,
                 action_space: gym.Space, reward: AgentReward, seed: int) -> None:
        if not isinstance(action_space, gym.spaces.Box) or not isinstance(observation_space, gym.spaces.Box):
            raise ConfigError("agent", f"({algorithm.name}) takes Box observations and continuous (Box) actions; "
                              f"this env has {observation_space} and {action_space}")
        check_learner(algorithm.learner, algorithm.device)
        try:
            check_settings(algorithm.name, algorithm.learner)
        except ArgumentError as err:
            raise ConfigError("agent.name" if err.argument == "name" else f"agent.learner.{err.argument}",
                              err.problem) from None
        _check_device(algorithm.device)
        self.spec, self.transitions, self.reward = algorithm, transitions, reward
        self.rng = np.random.default_rng(seed)
        normalised = algorithm.normalize_observations
        self.scaling = Scaling(transitions.obs.mean(0) if normalised else np.zeros(observation_space.shape),
                               transitions.obs.std(0) if normalised else np.ones(observation_space.shape),
                               action_space.low, action_space.high)
        self.learner = learner_class(algorithm.name)(
            int(np.prod(observation_space.shape)), int(np.prod(action_space.shape)), seed, **algorithm.learner)
        self.algorithm = Predictor(self.learner, self.scaling)

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
        import jax.numpy as jnp

        from rlhp.offline.learner import Batch

        data, scaling = self.transitions, self.scaling
        batch = Batch(*(jnp.asarray(column) for column in (
            scaling.obs(data.obs), scaling.to_unit(data.acts), self.rewards(), scaling.obs(data.next_obs),
            data.terminals)))
        with tqdm(total=steps, desc=f"{self.spec.name} steps", unit="step", leave=False, dynamic_ncols=True,
                  mininterval=1.0) as bar:
            for start in range(0, steps, CHUNK):
                count = min(CHUNK, steps - start)
                self.learner.update(batch, self.rng.integers(0, len(data), (count, self.learner.batch_size)))
                bar.update(count)
        return AgentReport(steps, np.zeros(0))

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """The agent's greedy action (an offline agent gathers no data, so it has no exploring policy)."""
        return self.algorithm.predict(obs)[0]

    def save(self, folder: str | Path) -> None:
        """Save ``agent.npz``: every array of the learner's state by its path, and the scaling (``obs_mean``,
        ``obs_std``, ``action_low``, ``action_high``); :func:`rlhp.offline.saved_policy` acts from it."""
        scaling = self.scaling
        np.savez(Path(folder) / "agent.npz", **self.learner.arrays(), obs_mean=scaling.mean, obs_std=scaling.std,
                 action_low=scaling.low, action_high=scaling.high)

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The weights of every network and its optimiser's state (checked for NaN after training)."""
        for name, array in self.learner.arrays().items():
            yield name, torch.from_numpy(np.array(array))



def _check_device(device: str) -> None:
    """Refuse ``device=cuda`` where JAX has no GPU (its CPU build): the run would train on the CPU unsaid."""
    if device.startswith("cuda"):
        import jax

        if not any(d.platform == "gpu" for d in jax.devices()):
            raise ConfigError("device", f"is {device}, but this JAX has no GPU (offline learners run in JAX: "
                              "install its CUDA build, or use device=cpu)")
