"""Policies as plain functions of a batch of observations, the one way rlhp mixes in random actions, and
exploration noise for deterministic off-policy agents."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
from stable_baselines3.common.noise import ActionNoise

from rlhp.errors import ArgumentError

Policy = Callable[[np.ndarray], np.ndarray]
"""Actions for a batch of observations, one per env copy."""


def random_actions(action_space: gym.Space, n: int) -> np.ndarray:
    """``n`` uniformly random actions from the (seeded) ``action_space``."""
    return np.stack([action_space.sample() for _ in range(n)])


def random_policy(action_space: gym.Space) -> Policy:
    """Uniformly random actions from the (seeded) ``action_space``."""
    return lambda obs: random_actions(action_space, len(obs))


def mixed_policy(policy: Policy, action_space: gym.Space, rng: np.random.Generator, random_prob: float,
                 switch_prob: float = 1.0) -> Policy:
    """``policy`` with uniformly random actions mixed in, per env copy.

    Each step, with probability ``switch_prob``, a copy re-chooses its mode: random with
    probability ``random_prob``, else ``policy``; it keeps that mode until it re-chooses.
    ``switch_prob=1`` is epsilon-greedy with epsilon ``random_prob``; a smaller ``switch_prob``
    gives runs of random actions (the exploration of Christiano et al.'s trajectory sampling).
    """
    if random_prob <= 0:
        return policy
    random_mode: np.ndarray | None = None

    def act(obs: np.ndarray) -> np.ndarray:
        nonlocal random_mode
        if random_mode is None:
            random_mode = np.zeros(len(obs), dtype=bool)
        # switch_prob 1 draws nothing for the switch, so epsilon-greedy spends one draw per copy and step.
        switch = rng.random(len(obs)) < switch_prob if switch_prob < 1 else np.ones(len(obs), dtype=bool)
        random_mode[switch] = rng.random(int(switch.sum())) < random_prob
        acts = policy(obs)
        if random_mode.any():
            acts = acts.copy()
            acts[random_mode] = random_actions(action_space, int(random_mode.sum()))
        return acts

    return act


class GaussianActionNoise(ActionNoise):
    """Gaussian exploration noise for a deterministic off-policy agent (TD3, DDPG), sized to the env.

    ``std`` is in SB3's scaled action units (each action dimension's range mapped to [-1, 1]), so one
    config serves every env: 0.1 is a tenth of each dimension's half-range (rl-baselines3-zoo's TD3
    setting). The agent trainer calls :meth:`bind` with the env's action space before any learning.
    """

    def __init__(self, std: float = 0.1) -> None:
        super().__init__()
        if std < 0:
            raise ArgumentError("std", f"must be >= 0, got {std}")
        self.std = std
        self.shape: tuple[int, ...] | None = None

    def bind(self, action_space: gym.spaces.Box) -> None:
        """Draw noise of ``action_space``'s shape from now on."""
        self.shape = action_space.shape

    def __call__(self) -> np.ndarray:
        """One draw, from NumPy's global generator as SB3's own noises do (seeded and saved with the run)."""
        if self.shape is None:
            raise RuntimeError("GaussianActionNoise.bind(action_space) was never called")
        return np.random.normal(0.0, self.std, self.shape)

    def __repr__(self) -> str:
        return f"GaussianActionNoise(std={self.std})"
