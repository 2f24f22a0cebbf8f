"""MuJoCo tasks on a fixed horizon: InvertedDoublePendulum that never ends early.

The id is registered in :mod:`rlhp.envs` with this module as a string entry point, so gymnasium imports it
(and MuJoCo with it) only when the env is made.
"""

from __future__ import annotations

import numpy as np
from gymnasium.envs.mujoco.inverted_double_pendulum_v5 import InvertedDoublePendulumEnv


class FixedHorizonInvertedDoublePendulum(InvertedDoublePendulumEnv):
    """InvertedDoublePendulum that never terminates: when the tip drops below its height limit the poles swing on,
    and every step with the tip down pays no alive bonus, only the distance and velocity penalties.

    Episodes always run to the time limit (1,000 steps), so an episode's length says nothing about how long the
    poles stayed up; the return still counts it, through the alive bonus.
    """

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Advance the physics one step; `terminated` is always False."""
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, False, truncated, info
