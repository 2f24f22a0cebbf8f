"""Recorded states: what an env needs to draw a step again, kept only while people label.

A run whose clips are drawn from recorded states (:meth:`rlhp.envs.GymEnv.record_states`) wraps each copy in
a :class:`StateRecorder`: each step's info then holds the state the step started from, and an episode's last
step also the state it ended in, so that an episode of ``n`` steps has ``n + 1`` states, one per observation.
What a state is belongs to the env (:meth:`rlhp.envs.GymEnv.read_state`): a MuJoCo env's joint positions and
velocities (here), an Atari console's emulator state (:mod:`rlhp.envs.atari`), and for any other env that
renders, the fallback: its screen itself, rendered while sampling (:func:`screen_state`). Drawing from a state
waits until a fragment is shown.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlhp.data.trajectory import FINAL_STATE, STATE

# MuJoCo renders headless through EGL (Mesa) unless told otherwise; gymnasium reads this when it first renders,
# and its own default (GLFW) needs a display.
os.environ.setdefault("MUJOCO_GL", "egl")

StateReader = Callable[[gym.Env], np.ndarray]
"""Reads the state of an env (the outermost wrapper) as one vector."""


SCREEN_WIDTH = 320
"""The widest a recorded screen is kept: a wider one keeps every k-th pixel, for the smallest whole k that
fits (a clip is scaled to its width when written)."""


def screen_state(env: gym.Env) -> np.ndarray:
    """The fallback state: the env's rendered screen (it was made with ``render_mode="rgb_array"``), at most
    :data:`SCREEN_WIDTH` wide, flattened; what a step costs in memory is its picture's bytes (180 kB for a
    600x400 frame kept at 300x200)."""
    return shrunk_screen(env.render()).ravel()


def shrunk_screen(frame: np.ndarray) -> np.ndarray:
    """``frame`` (H, W, 3) with every k-th row and column, for the smallest whole k that makes it at most
    :data:`SCREEN_WIDTH` wide."""
    k = -(-frame.shape[1] // SCREEN_WIDTH)
    return np.ascontiguousarray(frame[::k, ::k])


def has_physics(env: gym.Env) -> bool:
    """Whether the unwrapped ``env`` is a MuJoCo env whose state can be read and set again."""
    inner = env.unwrapped
    return all(hasattr(inner, name) for name in ("data", "model", "set_state"))


def physics_state(env: gym.Env) -> np.ndarray:
    """The unwrapped env's joint positions and velocities, as one float64 vector."""
    data = env.unwrapped.data
    return np.concatenate([data.qpos, data.qvel])


class ObservedPhysics:
    """An observation that is the physics state but for its first ``hidden`` joint positions (gymnasium's MuJoCo
    walkers leave out where the body is along the floor): the state again, with those set to 0. A dataset
    that recorded no states (D4RL's, Minari's) is drawn so, the camera following the body as it does live."""

    def __init__(self, hidden: int) -> None:
        self.hidden = hidden

    def states(self, obs: np.ndarray) -> np.ndarray:
        """The physics states of a batch of observations, (n, hidden + obs size)."""
        return np.concatenate([np.zeros((len(obs), self.hidden)), obs], axis=1)


def observed_physics(env: gym.Env, obs: np.ndarray) -> ObservedPhysics | None:
    """How ``env``'s observations give its physics state, judged on ``obs``, the observation of its current state:
    as the state without its first few joint positions (at most 2), or not at all (None)."""
    state = physics_state(env)
    flat = np.asarray(obs, np.float64).ravel()
    hidden = len(state) - len(flat)
    if 0 <= hidden <= 2 and np.allclose(state[hidden:], flat, atol=1e-6):
        return ObservedPhysics(hidden)
    return None


def set_physics_state(env: gym.Env, state: np.ndarray) -> None:
    """Put the unwrapped env in ``state`` (from :func:`physics_state`); MuJoCo recomputes the rest."""
    inner = env.unwrapped
    inner.set_state(state[:inner.model.nq], state[inner.model.nq:])


class StateRecorder(gym.Wrapper):
    """Adds each step's starting state to its info, and on an episode's last step the state it ends in."""

    def __init__(self, env: gym.Env, read: StateReader) -> None:
        super().__init__(env)
        self.read = read
        self._start = np.zeros(0)  # read at reset: some envs render nothing before it

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Reset, and note the state the first step starts from."""
        out = self.env.reset(**kwargs)
        self._start = self.read(self.env)
        return out

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Step, with the states in the info."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        end = self.read(self.env)
        info = {**info, STATE: self._start}
        if terminated or truncated:
            info[FINAL_STATE] = end
        self._start = end
        return obs, reward, terminated, truncated, info
