"""A batch of fragment pairs: the unit that is queried, labelled and trained on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import torch

from rlhp.data.frames import as_tensor, stacks, stacks_tensor
from rlhp.data.state import record


@record
@dataclass
class FragmentPairs:
    """A batch of fragment pairs: the steps have leading shape (pairs, 2, length), the provenance (pairs, 2).

    A fragment of ``length`` steps is stored as ``length + frame_stack`` frames: step t's observation is
    frames t .. t + frame_stack - 1 and its next observation the same one frame on, so neighbouring steps, and
    an observation and the next, share what they have in common (:attr:`obs` and :attr:`next_obs` are views).
    Without stacking (``frame_stack`` 1) a frame is a whole observation. ``rews`` are the true rewards (NaN
    where unknown); ``dones`` marks the last step of a terminal trajectory. Provenance: ``episode`` is the
    fragment's episode (its dataset row, -1 when it has none), ``start`` its first step there, ``quality``
    the episode's rank when its dataset ranks episodes, else its true return (what a ranking teacher compares).
    ``states`` are the recorded states behind each observation, (pairs, 2, length + 1, state size), where the
    env recorded them for drawing clips (:mod:`rlhp.envs.states`); else their size is 0, and they are no column.
    """

    frames: np.ndarray
    acts: np.ndarray
    dones: np.ndarray
    rews: np.ndarray
    episode: np.ndarray
    start: np.ndarray
    quality: np.ndarray
    frame_stack: int = 1
    states: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.states is None:  # none recorded
            self.states = np.zeros((*self.dones.shape[:2], self.dones.shape[-1] + 1, 0))
        if self.frames.ndim < 3 or self.frames.shape[2] != self.dones.shape[-1] + self.frame_stack:
            raise ValueError(f"frames must have shape (pairs, 2, length + frame_stack, ...) = "
                             f"({len(self.dones)}, 2, {self.dones.shape[-1] + self.frame_stack}, ...), "
                             f"got {self.frames.shape}")

    @property
    def obs(self) -> np.ndarray:
        """Each step's observation, (pairs, 2, length, *obs_shape): a view over :attr:`frames`."""
        return self._observations()[:, :, :-1]

    @property
    def next_obs(self) -> np.ndarray:
        """Each step's next observation, (pairs, 2, length, *obs_shape): a view over :attr:`frames`."""
        return self._observations()[:, :, 1:]

    def _observations(self) -> np.ndarray:
        return stacks(self.frames, self.frame_stack, axis=2) if self.frame_stack > 1 else self.frames

    def __len__(self) -> int:
        """Number of pairs."""
        return len(self.dones)

    def columns(self) -> dict[str, np.ndarray]:
        """The arrays that hold the pairs, one row per pair (``frame_stack`` aside, and ``states`` when none were
        recorded)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "frame_stack" and (f.name != "states" or self.states.shape[-1])}

    @classmethod
    def from_columns(cls, columns: Mapping[str, np.ndarray], frame_stack: int = 1) -> FragmentPairs:
        """Pairs from :meth:`columns`' arrays; unstacked ``obs`` and ``next_obs`` columns (stored before frames)
        become frames."""
        columns = dict(columns)
        if "frames" not in columns and frame_stack == 1:
            obs, next_obs = columns.pop("obs"), columns.pop("next_obs")
            if not np.array_equal(obs[:, :, 1:], next_obs[:, :, :-1], equal_nan=obs.dtype.kind == "f"):
                raise ValueError("next_obs is not obs one step on: these are not fragments of trajectories")
            columns["frames"] = np.concatenate([obs, next_obs[:, :, -1:]], axis=2)
        return cls(**columns, frame_stack=frame_stack)

    def __getitem__(self, idx: np.ndarray | slice) -> FragmentPairs:
        """The pairs at ``idx``."""
        return FragmentPairs.from_columns({k: v[idx] for k, v in self.columns().items()}, self.frame_stack)

    @staticmethod
    def concat(batches: list[FragmentPairs]) -> FragmentPairs:
        """Stack batches along the pair axis."""
        cols = [b.columns() for b in batches]
        return FragmentPairs.from_columns({k: np.concatenate([c[k] for c in cols]) for k in cols[0]},
                                          batches[0].frame_stack)

    def tensors(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """(obs, acts, next_obs, dones) as tensors on ``device``, the reward net's inputs; the observations are
        views over one tensor of the frames, so indexing them gathers only the pairs asked for."""
        frames = as_tensor(self.frames, device)
        observations = stacks_tensor(frames, self.frame_stack, 2) if self.frame_stack > 1 else frames
        acts, dones = (torch.as_tensor(a, device=device) for a in (self.acts, self.dones))
        return observations[:, :, :-1], acts, observations[:, :, 1:], dones
