"""Classic control with a fixed horizon: CartPole and MountainCarContinuous that never end early."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv

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
