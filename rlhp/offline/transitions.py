"""A dataset's episodes as one table of transitions, relabelled by the reward an offline agent learns on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlhp.data import Trajectory
from rlhp.errors import DataError
from rlhp.rewards import AgentReward


@dataclass(frozen=True)
class Transitions:
    """Every transition of a set of episodes, as float32 arrays with one row each: ``obs``, ``acts``,
    ``next_obs``, the env's rewards ``env_rews``, ``terminals`` (1 where the episode ended by termination,
    whose value is not bootstrapped) and ``episode`` (which episode each row is of, 0-based)."""

    obs: np.ndarray
    acts: np.ndarray
    next_obs: np.ndarray
    env_rews: np.ndarray
    terminals: np.ndarray
    episode: np.ndarray

    @classmethod
    def of(cls, trajectories: list[Trajectory]) -> Transitions:
        """The transitions of ``trajectories``, in order (flat Box observations and actions only)."""
        first = trajectories[0]
        if not all(isinstance(x, np.ndarray) for x in (first.obs, first.acts)):
            raise DataError("offline agents take flat (Box) observations and actions; this dataset's are "
                            f"{type(first.obs).__name__} and {type(first.acts).__name__}")
        lengths = np.array([len(t) for t in trajectories])
        last = np.zeros(int(lengths.sum()), np.float32)
        ends = np.cumsum(lengths) - 1
        last[ends[[t.terminal for t in trajectories]]] = 1.0
        return cls(obs=np.concatenate([t.obs[:-1] for t in trajectories]).astype(np.float32, copy=False),
                   acts=np.concatenate([t.acts for t in trajectories]).astype(np.float32, copy=False),
                   next_obs=np.concatenate([t.obs[1:] for t in trajectories]).astype(np.float32, copy=False),
                   env_rews=np.concatenate([t.rews for t in trajectories]).astype(np.float32, copy=False),
                   terminals=last, episode=np.repeat(np.arange(len(trajectories)), lengths))

    def __len__(self) -> int:
        """Number of transitions."""
        return len(self.env_rews)

    def rewards(self, reward: AgentReward) -> np.ndarray:
        """Every transition's reward under ``reward`` (the env's own, or the learned one read episode by
        episode)."""
        starts = np.flatnonzero(np.diff(self.episode, prepend=-1))
        return reward.relabel(self.obs, self.acts, self.next_obs, self.terminals > 0, self.env_rews, starts)

    def return_range(self, rewards: np.ndarray) -> float:
        """The best episode's return under ``rewards`` minus the worst's (IQL's scale for MuJoCo's rewards)."""
        returns = np.bincount(self.episode, weights=rewards)
        return float(returns.max() - returns.min())
