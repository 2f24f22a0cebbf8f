"""What the loop asks of a trajectory source, and of the agent some sources train."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from rlhp.data import Trajectory


@dataclass
class AgentReport:
    """What one call of :meth:`Agent.train` did: env steps trained and the true returns of the
    training episodes that finished meanwhile."""

    steps: int
    returns: np.ndarray


class Agent(ABC):
    """An RL agent trained on the learned reward."""

    algorithm: BaseAlgorithm

    @property
    @abstractmethod
    def rollout_steps(self) -> int:
        """Env steps collected between updates: training only ever covers whole multiples of this."""

    @abstractmethod
    def train(self, steps: int) -> AgentReport:
        """Train at most ``steps`` env steps (whole rollouts)."""

    @abstractmethod
    def reward_changed(self) -> None:
        """The reward model was just updated: rewards the agent stored (a replay buffer's) are stale."""

    def save(self, path: str | Path) -> None:
        """Save the SB3 agent as a ``.zip`` that ``<Algorithm>.load`` reads."""
        self.algorithm.save(str(path))

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The policy's weights (checked for NaN after training)."""
        return self.algorithm.policy.named_parameters()


class TrajectorySource(ABC):
    """Where the loop's trajectories come from: an agent being trained, or a fixed dataset."""

    @property
    def agent(self) -> Agent | None:
        """The agent this source trains on the learned reward; None when it trains none."""
        return None

    @abstractmethod
    def sample(self, steps: int) -> list[Trajectory]:
        """Trajectories covering at least ``steps`` transitions (all there are, if fewer)."""

    @abstractmethod
    def held_out(self, steps: int) -> list[Trajectory]:
        """Trajectories never sampled, to evaluate the learned reward on."""

    def metrics(self) -> dict[str, float]:
        """Figures about the last :meth:`sample`, logged with the round (none unless overridden)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to sample as this one would (nothing, unless overridden)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a source without state accepts only an empty one)."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, but was given {sorted(state)}")


def take(trajectories: Iterable[Trajectory], steps: int) -> list[Trajectory]:
    """Trajectories in the given order until they cover ``steps`` transitions (or run out)."""
    out: list[Trajectory] = []
    covered = 0
    for traj in trajectories:
        if covered >= steps:
            break
        out.append(traj)
        covered += len(traj)
    return out
