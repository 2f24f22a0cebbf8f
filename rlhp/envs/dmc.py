"""DeepMind Control's suite (Tassa et al. 2018) through Shimmy's gymnasium binding: ``env=dmc env.id=walker-walk``.

The benchmark of preference-based RL since PEBBLE (walker-walk, cheetah-run, quadruped-walk, humanoid-stand).
A task's observation is a dict of arrays; the agent and the reward model see them flattened into one float32
vector in the space's key order (alphabetical, as gymnasium orders a dict space), so a run's inputs do not
depend on the order dm_control happens to return them in. Episodes are the task's own: 1,000 steps, ended
by the time limit alone. Clips for people are drawn from each step's recorded physics state.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from rlhp.envs.base import GymEnv
from rlhp.errors import ArgumentError

HORIZON = 1000
"""The control steps of a suite task's episode: every task's time limit is 1,000 of its control steps."""


class DmcEnv(GymEnv):
    """``env=dmc env.id=walker-walk``: a task of dm_control's suite, ``<domain>-<task>`` as Shimmy names it
    (``dm_control/walker-walk-v0`` is accepted too), its observations flattened to float32."""

    longest_episode = HORIZON

    def register(self) -> None:
        """Have Shimmy register dm_control's ids (gymnasium 1.x registers a package's envs at its import)."""
        try:
            # dm_control's composer, which Shimmy imports, turns on every DeprecationWarning of every library for
            # the whole process; the filters are put back as they were, so the console stays quiet.
            with warnings.catch_warnings():
                import shimmy  # noqa: F401
                from dm_control import suite  # noqa: F401
        except ImportError:
            raise ArgumentError("id", "needs DeepMind Control, which comes with an extra: pip install "
                                "'rlhp[dmc]'") from None

    def registered_id(self, id: str) -> str:
        """``walker-walk`` -> ``dm_control/walker-walk-v0``."""
        full = id if id.startswith("dm_control/") else f"dm_control/{id}-v0"
        if full not in gym.registry:
            tasks = sorted(k.removeprefix("dm_control/").removesuffix("-v0") for k in gym.registry
                           if k.startswith("dm_control/") and k.count("-") == 2 and not k.endswith("-rgb-v0"))
            raise ArgumentError("id", f"must be a task of dm_control's suite, <domain>-<task> (e.g. walker-walk, "
                                f"cheetah-run), got {id!r}; the tasks: {', '.join(tasks)}")
        return full

    def build(self, kwargs: dict[str, Any], max_episode_steps: int | None) -> gym.Env:
        """The task with its observations flattened to float32 (and a shorter time limit when asked);
        ``width`` and ``height`` size its pictures, as they do a gymnasium MuJoCo env's."""
        size = {k: kwargs.pop(k) for k in ("width", "height") if k in kwargs}
        if size:
            kwargs["render_kwargs"] = {**kwargs.get("render_kwargs", {}), **size}
        env = gym.make(self.id, **kwargs)
        # Shimmy gives the control step's length in milliseconds as the frame rate; a clip plays in real time
        # at one frame a control step.
        env.metadata = {**env.metadata, "render_fps": 1 / env.unwrapped.dt}
        space = gym.spaces.flatten_space(env.observation_space)
        flat = gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
        env = gym.wrappers.TransformObservation(env, partial(_flattened, env.observation_space), flat)
        if max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps)
        return env

    def restorable(self, env: gym.Env) -> bool:
        """A task's whole state is its physics' (joint positions, velocities and actuator activations)."""
        return True

    def read_state(self, env: gym.Env) -> np.ndarray:
        """The physics state dm_control sets again: positions, velocities, actuator activations."""
        return env.unwrapped.physics.get_state().copy()

    def write_state(self, env: gym.Env, state: np.ndarray) -> None:
        """Put a copy in ``state``, with everything derived from it recomputed for drawing."""
        physics = env.unwrapped.physics
        with physics.reset_context():
            physics.set_state(state)


def _flattened(space: gym.spaces.Dict, obs: dict[str, np.ndarray]) -> np.ndarray:
    """``obs`` as one float32 vector, its arrays in ``space``'s key order."""
    return gym.spaces.flatten(space, obs).astype(np.float32)
