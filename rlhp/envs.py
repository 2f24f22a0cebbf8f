"""Environments: fixed-horizon CartPole and MountainCarContinuous, and a factory for vectorised gymnasium envs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

from rlhp.errors import ArgumentError

MAX_ENVS = 4096
"""The most env copies one VecEnv may hold: they step one after another in Python, so more is a typo."""

FIXED_HORIZON_CARTPOLE = "rlhp/CartPole-FixedHorizon-v0"


class FixedHorizonCartPole(CartPoleEnv):
    """CartPole that never terminates: reward 1 while the pole is up and the cart on the track.

    Episodes always run to the time limit (500 steps), so an episode's length says nothing
    about how well the agent did and the return counts the steps spent upright.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Physics keep running after the pole falls, so observations leave the usual bounds.
        high = np.full(4, np.inf, dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Advance the physics one step; `terminated` is always False."""
        # CartPoleEnv warns once it is stepped past termination; here that is the design.
        self.steps_beyond_terminated = None
        obs, _, fallen, truncated, info = super().step(action)
        return obs, 0.0 if fallen else 1.0, False, truncated, info

    def render(self) -> np.ndarray | None:
        """CartPole's picture, with a cart that has run off the track drawn at its edge."""
        if self.state is None:
            return super().render()
        state = self.state
        # pygame's drawing overflows for a cart far off screen, which the endless physics allow.
        self.state = np.array([np.clip(state[0], -self.x_threshold, self.x_threshold), *state[1:]])
        try:
            return super().render()
        finally:
            self.state = state


gym.register(FIXED_HORIZON_CARTPOLE, entry_point=FixedHorizonCartPole, max_episode_steps=500)

FIXED_HORIZON_MOUNTAIN_CAR = "rlhp/MountainCarContinuous-FixedHorizon-v0"


class FixedHorizonMountainCar(Continuous_MountainCarEnv):
    """MountainCarContinuous that never terminates: every step at the goal pays its bonus (100), so
    episodes run to the time limit (999 steps) and their length says nothing of how well the car did."""

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Advance the physics one step; `terminated` is always False."""
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, False, truncated, info


gym.register(FIXED_HORIZON_MOUNTAIN_CAR, entry_point=FixedHorizonMountainCar, max_episode_steps=999)


class GymEnv:
    """Builds vectorised copies of a registered gymnasium environment.

    Args:
        id: gymnasium id, e.g. ``Pendulum-v1``.
        n_envs: number of parallel copies in the training VecEnv.
        max_episode_steps: overrides the id's time limit when set.
        kwargs: keyword arguments passed to ``gymnasium.make``.
    """

    def __init__(
        self,
        id: str,
        n_envs: int = 8,
        max_episode_steps: int | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(id, str) or not id:
            raise ArgumentError("id", "is required, e.g. `env=gym env.id=Pendulum-v1`")
        try:
            gym.spec(id)
        except gym.error.Error as err:
            raise ArgumentError("id", f"{id!r} is not a registered gymnasium id ({err}); check the spelling") from None
        if not 1 <= n_envs <= MAX_ENVS:
            raise ArgumentError("n_envs", f"must lie in [1, {MAX_ENVS}], got {n_envs}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ArgumentError("max_episode_steps", f"must be at least 1 (or null), got {max_episode_steps}")
        self.id = id
        self.n_envs = n_envs
        self.max_episode_steps = max_episode_steps
        self.kwargs = dict(kwargs or {})

    def _kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        extra = {} if self.max_episode_steps is None else {"max_episode_steps": self.max_episode_steps}
        return {**extra, **self.kwargs, **overrides}

    def make(self, seed: int, n_envs: int | None = None, **overrides: Any) -> VecEnv:
        """A seeded DummyVecEnv with a Monitor around each copy; ``overrides`` go to ``gymnasium.make``."""
        return make_vec_env(self.id, n_envs=n_envs or self.n_envs, seed=seed, env_kwargs=self._kwargs(overrides))

    def make_single(self, **overrides: Any) -> gym.Env:
        """One unwrapped-by-vec copy, e.g. for rendering or inspecting spaces."""
        return gym.make(self.id, **self._kwargs(overrides))

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """The observation and action spaces (from a copy made and closed for the purpose)."""
        probe = self.make_single()
        probe.close()
        return probe.observation_space, probe.action_space
