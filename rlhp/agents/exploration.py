"""PEBBLE's unsupervised pre-training reward: the particle estimate of state entropy (Lee et al. 2021)."""

from __future__ import annotations

import numpy as np
import torch

from rlhp.errors import ArgumentError
from rlhp.rewards.entropy import state_entropy


class StateEntropyReward:
    """Rewards each new observation with ``log(1 + d)``, ``d`` its distance to its ``k``-th nearest neighbour
    among the last ``capacity`` observations: the agent is paid for going where it has not been, so the
    first queries compare varied behaviour instead of a random policy's.

    Args:
        k: the neighbour whose distance is the reward.
        capacity: observations remembered (the oldest are forgotten first).
    """

    def __init__(self, k: int = 5, capacity: int = 10_000) -> None:
        if k < 1 or capacity <= k:
            raise ArgumentError("k", f"must lie in [1, capacity), got k={k}, capacity={capacity}")
        self.k, self.capacity = k, capacity
        self.memory = torch.zeros(0)
        self.next = 0

    def __call__(self, next_obs: np.ndarray) -> np.ndarray:
        """The rewards of a batch of observations, which are then remembered."""
        x = torch.as_tensor(np.asarray(next_obs, dtype=np.float32).reshape(len(next_obs), -1))
        self._remember(x)
        return state_entropy(x, self.memory, self.k).numpy()

    def _remember(self, x: torch.Tensor) -> None:
        if len(self.memory) < self.capacity:
            self.memory = torch.cat([self.memory.reshape(-1, x.shape[1]), x])[: self.capacity]
            return
        slots = (self.next + torch.arange(len(x))) % self.capacity
        self.memory[slots] = x
        self.next = int(slots[-1] + 1) % self.capacity
