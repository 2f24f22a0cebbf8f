"""Clips of fragments: the real env's frames of each step, rendered after the fact from the observations.

Sampling renders nothing. Only fragments that become queries are drawn: the env is put in the state
each observation describes and rendered, so the frames are exactly what the env showed at those
steps, and memory holds one clip at a time. This needs envs whose observation is their whole state
(the classic-control tasks); others are refused when the run starts.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from rlhp.data import FragmentPairs
from rlhp.envs import GymEnv
from rlhp.errors import ConfigError
from rlhp.video import write_video

Restore = Callable[[gym.Env, np.ndarray, np.ndarray], None]
"""Puts an unwrapped env in the state an observation describes (the action too, where it is drawn)."""


def _set_state(env: gym.Env, obs: np.ndarray, act: np.ndarray) -> None:
    env.state = np.asarray(obs, dtype=np.float64)


def _pendulum(env: gym.Env, obs: np.ndarray, act: np.ndarray) -> None:
    env.state = np.array([np.arctan2(obs[1], obs[0]), obs[2]])
    env.last_u = float(np.asarray(act).reshape(-1)[0])  # the torque arrow


def _acrobot(env: gym.Env, obs: np.ndarray, act: np.ndarray) -> None:
    env.state = np.array([np.arctan2(obs[1], obs[0]), np.arctan2(obs[3], obs[2]), obs[4], obs[5]])


RESTORERS: dict[type, Restore] = {
    CartPoleEnv: _set_state,
    MountainCarEnv: _set_state,
    Continuous_MountainCarEnv: _set_state,
    PendulumEnv: _pendulum,
    AcrobotEnv: _acrobot,
}
"""Envs whose observation is their whole state, so that a fragment's frames can be drawn again."""


def restorer(env: gym.Env) -> Restore | None:
    """How to put ``env`` in an observation's state, or None when its observations do not say."""
    for cls in type(env.unwrapped).__mro__:
        if cls in RESTORERS:
            return RESTORERS[cls]
    return None


class ClipRenderer:
    """Draws fragments of ``env`` and writes them as H.264 MP4 clips ``width`` pixels wide.

    Args:
        env: the run's env.
        width: clip width in pixels (two sit side by side on a page).
        fps: frames per second; None: the env's own ``render_fps``.
        workers: clips encoded at once (each by its own ffmpeg process).
    """

    def __init__(self, env: GymEnv, width: int = 320, fps: float | None = None, workers: int = 4) -> None:
        self.env_config = env
        self.env = env.make_single(render_mode="rgb_array")
        self.restore = restorer(self.env)
        if self.restore is None:
            names = ", ".join(sorted(c.__name__ for c in RESTORERS))
            raise ConfigError("env.id", f"{env.id}'s observations do not give its whole state, so rlhp cannot draw "
                              f"its fragments for people to compare; human labels work on {names}")
        self.env.reset(seed=0)
        self.fps = fps or self.env.metadata.get("render_fps", 30)
        self.width, self.workers = width, workers

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray) -> np.ndarray:
        """(steps + 1, H, W, 3) frames: each step's observation, then the state the last step led to."""
        inner = self.env.unwrapped
        shots = []
        for o, a in zip([*obs, last_obs], [*acts, acts[-1]]):
            self.restore(inner, o, a)
            shots.append(self.env.render())
        return np.stack(shots)

    def write(self, pairs: FragmentPairs, names: list[tuple[str, str]], folder: Path) -> None:
        """Write each pair's two clips as ``folder / name`` (rendering here, encoding in parallel)."""
        folder.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(self.workers) as pool:
            jobs: list[Future] = []
            for i, pair_names in enumerate(names):
                for side, name in enumerate(pair_names):
                    if len(jobs) >= 2 * self.workers:  # frames wait in memory only for a free encoder
                        jobs.pop(0).result()
                    shots = self.frames(pairs.obs[i, side], pairs.acts[i, side], pairs.next_obs[i, side, -1])
                    jobs.append(pool.submit(write_video, shots, folder / name, self.fps, self.width))
            for job in jobs:
                job.result()
