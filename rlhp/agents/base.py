"""What the loop asks of a trajectory source, and of the agent some sources train."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from stable_baselines3.common.type_aliases import PolicyPredictor

from rlhp.data import Trajectory


@dataclass
class AgentReport:
    """What one call of :meth:`Agent.train` did: env steps trained, and the true returns of the training
    episodes that finished meanwhile and whether each succeeded (only where the env says: Meta-World's)."""

    steps: int
    returns: np.ndarray
    successes: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))


class Agent(ABC):
    """An RL agent trained on the learned reward."""

    algorithm: PolicyPredictor
    """What acts: SB3's algorithm, or anything with its ``predict`` (SB3's ``evaluate_policy`` runs it)."""
    trains: bool = True
    """Whether there is an agent at all (a fixed dataset trains none; see :class:`NoAgent`)."""

    @property
    @abstractmethod
    def rollout_steps(self) -> int:
        """Env steps collected between updates: training only ever covers whole multiples of this."""

    @abstractmethod
    def train(self, steps: int) -> AgentReport:
        """Train at most ``steps`` env steps (whole rollouts)."""

    @abstractmethod
    def policy(self, obs: np.ndarray) -> np.ndarray:
        """The agent's stochastic action for a batch of observations, as during training."""

    def step_weights(self, rounds: int) -> np.ndarray:
        """How ``total_timesteps`` is shared among the rounds (evenly, unless overridden)."""
        return np.ones(rounds)

    def derived_arrays(self) -> list[np.ndarray]:
        """Arrays the agent recomputes before it next reads them (a relabelled replay buffer's rewards): a
        checkpoint stores only their shape (none unless overridden)."""
        return []

    def save(self, folder: str | Path) -> None:
        """Save into a checkpoint's ``folder``: the SB3 agent as ``agent.zip``, which ``<Algorithm>.load`` reads."""
        self.algorithm.save(str(Path(folder) / "agent.zip"))

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The policy's weights (checked for NaN after training)."""
        return self.algorithm.policy.named_parameters()


class NoAgent(Agent):
    """The agent of a source that trains none: every training call trains nothing."""

    trains = False

    @property
    def rollout_steps(self) -> int:
        """Any step count is whole."""
        return 1

    def train(self, steps: int) -> AgentReport:
        """Train nothing."""
        return AgentReport(0, np.zeros(0))

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """There is no policy to act."""
        raise TypeError("a trajectory source without an agent has no policy")

    def save(self, folder: str | Path) -> None:
        """Nothing to save."""

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """No weights."""
        return iter(())


class TrajectorySource(ABC):
    """Where the loop's trajectories come from: an agent being trained, or a fixed dataset."""

    @property
    def agent(self) -> Agent:
        """The agent this source trains on the learned reward (:class:`NoAgent` unless overridden)."""
        return NoAgent()

    @abstractmethod
    def sample(self, steps: int) -> list[Trajectory]:
        """Trajectories covering at least ``steps`` transitions (all there are, if fewer)."""

    @abstractmethod
    def held_out(self, steps: int) -> list[Trajectory]:
        """Trajectories never sampled, to evaluate the learned reward on."""

    def metrics(self) -> dict[str, float]:
        """Figures about the last :meth:`sample`, logged with the round (none unless overridden)."""
        return {}

    @property
    def pretraining_steps(self) -> int:
        """Env steps of each env copy's unsupervised pre-training still to run before the first sample (none
        unless overridden)."""
        return 0

    def pretraining_episodes(self) -> list[Trajectory]:
        """The episodes the unsupervised pre-training finished, handed over once after the first sample (none
        unless overridden)."""
        return []


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
