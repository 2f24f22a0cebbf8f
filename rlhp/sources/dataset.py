"""A fixed dataset of trajectories as the source: reward learning with no agent in the loop, or an offline agent
trained on the dataset relabelled by the learned reward."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from rlhp.agents.base import Agent, NoAgent, TrajectorySource, take
from rlhp.agents.offline import OfflineAgent
from rlhp.data import Trajectory
from rlhp.data.hub import open_trajectories
from rlhp.data.spaces import space_from_json
from rlhp.data.trajectory import digest
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, DataError, RunError
from rlhp.offline import OfflineAlgorithm, Transitions
from rlhp.rewards import AgentReward, EnvReward

log = logging.getLogger(__name__)


class DatasetSource(TrajectorySource):
    """Trajectories from a saved dataset, shuffled.

    Args:
        path: a save_to_disk folder (e.g. a run's ``trajectories/``), Parquet files or a Hub dataset id.
        env: the environment the dataset's spaces must match.
        rng: random generator for shuffling.
        held_out_frac: share of episodes never sampled, kept to evaluate the learned reward.
        rank_by: what ranks the episodes for a ranking teacher (gatherer=ranked): ``rank``, the
            dataset's rank column when it has one (else the return), or ``return``, each episode's
            true return even when there are ranks (Brown et al. 2019 ranked T-REX's demonstrations so).
        algorithm: the agent group's choice: an offline one (``agent=iql``) trains on every episode of the
            dataset, relabelled by ``reward``; an online one (an SB3 algorithm, the group's default) trains none
            here, nor does None.
        reward: what the offline agent learns on: the learned reward net, or the env's own (the ceiling).
        seed: seeds the offline agent.
    """

    def __init__(self, path: str, env: GymEnv, rng: np.random.Generator, held_out_frac: float = 0.2,
                 rank_by: Literal["rank", "return"] = "rank",
                 algorithm: OfflineAlgorithm | Callable[..., Any] | None = None,
                 reward: AgentReward | None = None, seed: int = 0) -> None:
        if rank_by not in ("rank", "return"):
            raise ArgumentError("rank_by", f"must be rank or return, got {rank_by!r}")
        self.path, self.rank_by, self.rng = path, rank_by, rng
        trajectories, meta = self._open()
        for key, space in zip(("observation_space", "action_space"), env.spaces()):
            if key in meta and space_from_json(meta[key]) != space:
                raise DataError(f"dataset {path!r} was recorded with {key} {space_from_json(meta[key])}, but "
                                f"env {env.id!r} has {space}; set the env it was recorded in")
            # Datasets from elsewhere (imitation's) carry no spaces: the array shapes must still fit.
            first = trajectories[0].obs if key == "observation_space" else trajectories[0].acts
            if key not in meta and isinstance(first, np.ndarray) and first.shape[1:] != space.shape:
                raise DataError(f"dataset {path!r} has {key[:-6]} of shape {first.shape[1:]} per step, but env "
                                f"{env.id!r} has {space}; set the env it was recorded in")
        if not 0 <= held_out_frac < 1:
            raise ArgumentError("held_out_frac", f"must lie in [0, 1), got {held_out_frac}")
        self.order = rng.permutation(len(trajectories))
        self.n_held = int(round(held_out_frac * len(trajectories)))
        if len(trajectories) - self.n_held < 1:
            raise ArgumentError("held_out_frac", f"leaves no episode of {len(trajectories)} to learn from")
        self.digest = digest(trajectories)
        self._split(trajectories)
        self._agent: Agent = NoAgent()
        if isinstance(algorithm, OfflineAlgorithm):
            self._agent = OfflineAgent(algorithm, Transitions.of(trajectories), *env.spaces(),
                                       reward or EnvReward(), seed)
        elif algorithm is not None:
            log.info("trajectories=dataset trains no online agent (%s): only an offline one (agent=iql, td3bc) "
                     "trains on a dataset", getattr(algorithm, "func", algorithm).__name__)

    @property
    def agent(self) -> Agent:
        """The offline agent trained on the dataset (:class:`NoAgent` when none is)."""
        return self._agent

    def _open(self) -> tuple[list[Trajectory], dict]:
        trajectories, meta = open_trajectories(self.path, key="trajectories.path")
        if self.rank_by == "return":  # with no rank, the fragmenter takes the episode's return as its quality
            trajectories = [dataclasses.replace(t, rank=None) for t in trajectories]
        return trajectories, meta

    def _split(self, trajectories: list[Trajectory]) -> None:
        self.trajectories = [trajectories[i] for i in self.order[self.n_held:]]
        self._held_out = [trajectories[i] for i in self.order[:self.n_held]]

    def save_state(self) -> dict[str, Any]:
        """The dataset's path and content hash, not its trajectories: the resumed run reads them again."""
        return {k: v for k, v in self.__dict__.items() if k not in ("trajectories", "_held_out")}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back :meth:`save_state`'s, on the data read when this source was built, if it is the run's."""
        if state["digest"] != self.digest:
            raise RunError(f"dataset {self.path!r} changed since the run began (its content hash differs); a run "
                           "resumes only on the data it started with: restore it, or start a new run")
        self.__dict__.update(state)  # the split is the one the same seed made when this source was built

    def sample(self, steps: int) -> list[Trajectory]:
        """Shuffled episodes covering at least ``steps`` transitions (all of them if fewer)."""
        return take((self.trajectories[i] for i in self.rng.permutation(len(self.trajectories))), steps)

    def held_out(self, steps: int) -> list[Trajectory]:
        """The episodes kept out of sampling."""
        return self._held_out
