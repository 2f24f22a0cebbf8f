"""Demonstrations as the source of fragments, with an agent trained on the reward learned from them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from rlhp.agents.agent import AgentTrainer
from rlhp.agents.base import TrajectorySource
from rlhp.data import Trajectory
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError
from rlhp.rewards import AgentReward
from rlhp.sources.dataset import DatasetSource


class DemoSource(TrajectorySource):
    """Fragments from a saved (e.g. ranked) demonstration dataset; an SB3 agent trains on the learned
    reward meanwhile, as T-REX does once its reward is learned.

    Args:
        path: the dataset (see :class:`DatasetSource`).
        algorithm, env, reward, seed, rng: as for :class:`AgentTrainer`.
        held_out_frac: share of the dataset's episodes kept out of sampling.
        rank_by: ``rank`` or ``return``: what ranks the episodes (see :class:`DatasetSource`).
        max_episode_steps: cut the agent's training episodes (see :class:`AgentTrainer`).
        agent_frac: share of the sampled steps taken from the agent's own episodes (0: demonstrations
            only, T-REX); with ``gatherer=mixed`` another teacher labels the pairs they are in.
    """

    def __init__(self, path: str, algorithm: Callable[..., BaseAlgorithm], env: GymEnv, reward: AgentReward,
                 seed: int, rng: np.random.Generator, held_out_frac: float = 0.2,
                 rank_by: Literal["rank", "return"] = "rank", max_episode_steps: int | None = None,
                 agent_frac: float = 0.0) -> None:
        if not 0 <= agent_frac <= 1:
            raise ArgumentError("agent_frac", f"must be in [0, 1], got {agent_frac}")
        self.agent_frac = agent_frac
        self.demos = DatasetSource(path, env, rng, held_out_frac, rank_by)
        self.trainer = AgentTrainer(algorithm, env, reward, seed, rng, max_episode_steps=max_episode_steps)

    @property
    def agent(self) -> AgentTrainer:
        """The agent trained on the reward learned from the demonstrations."""
        return self.trainer

    def sample(self, steps: int) -> list[Trajectory]:
        """Demonstration episodes, and the agent's own for ``agent_frac`` of the steps."""
        own = int(round(self.agent_frac * steps))
        return self.demos.sample(steps - own) + (self.trainer.sample(own) if own else [])

    def metrics(self) -> dict[str, float]:
        """Where the agent's share of the last sample came from (see :meth:`AgentTrainer.metrics`)."""
        return self.trainer.metrics() if self.agent_frac else {}

    def held_out(self, steps: int) -> list[Trajectory]:
        """Demonstrations kept out of sampling."""
        return self.demos.held_out(steps)
