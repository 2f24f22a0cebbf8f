"""Physics states: what a MuJoCo env needs to draw a step again (its joint positions and velocities).

Only a run whose queries people see records them (:meth:`rlhp.envs.GymEnv.record_physics`): each step's info
then holds the state the step started from, and an episode's last step also the state it ended in, so that
an episode of ``n`` steps has ``n + 1`` states, one per observation. Rendering waits until a fragment is shown.
"""

from __future__ import annotations

import os
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlhp.data.trajectory import FINAL_STATE, STATE

# MuJoCo renders headless through EGL (Mesa) unless told otherwise; gymnasium reads this when it first renders,
# and its own default (GLFW) needs a display.
os.environ.setdefault("MUJOCO_GL", "egl")


def has_physics(env: gym.Env) -> bool:
    """Whether the unwrapped ``env`` is a MuJoCo env whose state can be read and set again."""
    inner = env.unwrapped
    return all(hasattr(inner, name) for name in ("data", "model", "set_state"))


def physics_state(env: gym.Env) -> np.ndarray:
    """The unwrapped env's joint positions and velocities, as one float64 vector."""
    data = env.unwrapped.data
    return np.concatenate([data.qpos, data.qvel])


def set_physics_state(env: gym.Env, state: np.ndarray) -> None:
    """Put the unwrapped env in ``state`` (from :func:`physics_state`); MuJoCo recomputes the rest."""
    inner = env.unwrapped
    inner.set_state(state[:inner.model.nq], state[inner.model.nq:])


class PhysicsRecorder(gym.Wrapper):
    """Adds each step's starting state to its info, and on an episode's last step the state it ends in."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._start = physics_state(env)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Reset, and note the state the first step starts from."""
        out = self.env.reset(**kwargs)
        self._start = physics_state(self.env)
        return out

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Step, with the states in the info."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        end = physics_state(self.env)
        info = {**info, STATE: self._start}
        if terminated or truncated:
            info[FINAL_STATE] = end
        self._start = end
        return obs, reward, terminated, truncated, info
