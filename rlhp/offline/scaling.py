"""How an offline learner reads the env: observations standardised or kept, actions mapped to [-1, 1] and back."""

from __future__ import annotations

import numpy as np


class Scaling:
    """How the env's observations and actions map to the learner's: observations standardised (TD3+BC's) or kept,
    actions from the env's bounds to [-1, 1]."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        self.mean, self.std = mean.astype(np.float32), np.maximum(std, 1e-3).astype(np.float32)
        self.low, self.high = low.astype(np.float32), high.astype(np.float32)

    def obs(self, obs: np.ndarray) -> np.ndarray:
        """Observations as the learner reads them."""
        return (np.asarray(obs, np.float32) - self.mean) / self.std

    def to_unit(self, acts: np.ndarray) -> np.ndarray:
        """The env's actions in [-1, 1]."""
        return (2 * (acts - self.low) / (self.high - self.low) - 1).astype(np.float32)

    def to_env(self, unit: np.ndarray) -> np.ndarray:
        """Actions in [-1, 1] in the env's bounds."""
        return self.low + (np.asarray(unit) + 1) * (self.high - self.low) / 2
