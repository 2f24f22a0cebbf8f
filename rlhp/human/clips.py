"""Clips of fragments: each step's picture, drawn after the fact from the observations.

Sampling renders nothing. Only fragments that become queries are drawn, and memory holds one clip at a time.
How depends on the env (:func:`drawer`): a classic-control env is put in the state each observation describes
and rendered, so the frames are exactly what the env showed; a MuJoCo env is put in the physics state it
recorded at each step (:mod:`rlhp.envs.states`) and rendered headless through EGL, at a frame rate a person
needs rather than every step; an Atari game replays each step from the emulator state it recorded, in the
console's colours; a MinAtar frame is coloured with MinAtar's own palette. Any other env that renders gets
the fallback: its screens, rendered while sampling and recorded only when people label. One that does not
render but observes stacks of images (channel first) shows the newest frame of each, as the agent sees it.
Envs that draw no pictures are refused when the run starts.
"""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from rlhp.data import FragmentPairs
from rlhp.envs import AtariEnv, GymEnv, MinAtarEnv
from rlhp.envs.atari import CONSOLE_HZ, replay
from rlhp.envs.states import ObservedPhysics, has_physics, observed_physics, shrunk_screen
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


class Drawer(Protocol):
    """Draws a fragment's steps as RGB frames."""

    fps: float
    """The frame rate at which a person sees the env as it runs."""

    needs_states: bool
    """Whether it draws from the states the env records (only then are they recorded)."""
    slow: bool
    """Whether a clip costs seconds to draw (MuJoCo's): then clips are drawn only a few ahead of people."""

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """(frames, H, W, 3) uint8 frames of a fragment from its observations, actions, last next observation
        and recorded states (one per observation, and one for the last next observation)."""
        ...


class RestoredFrames:
    """The env's own renders, with the env put in the state each observation describes (classic control)."""

    needs_states = False
    slow = False

    def __init__(self, env: GymEnv) -> None:
        self.env = env.make_single(render_mode="rgb_array")
        self.restore = restorer(self.env)
        self.env.reset(seed=0)
        self.fps = self.env.metadata["render_fps"]  # every classic-control env says it

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """Each observation's state, rendered."""
        inner = self.env.unwrapped
        shots = []
        for o, a in zip([*obs, last_obs], [*acts, acts[-1]]):
            self.restore(inner, o, a)
            shots.append(self.env.render())
        return np.stack(shots)


class GameFrames:
    """An Atari game's colour screens, each step replayed from the emulator state it started in (the agent sees
    grey 84x84 frames); a step costs the console a few frames, well under a millisecond."""

    needs_states = True
    slow = False

    def __init__(self, env: AtariEnv) -> None:
        self.env = env.make_single(render_mode="rgb_array")
        self.env.reset(seed=0)
        self.frame_skip = env.frame_skip
        self.fps = CONSOLE_HZ / env.frame_skip

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """(steps, 210, 160, 3): the screen after each step."""
        if not states.shape[-1]:
            raise ValueError("these fragments carry no emulator states: the env did not record them")
        return np.stack([replay(self.env, state, int(act), self.frame_skip) for state, act in zip(states, acts)])


class PaletteFrames:
    """Channel-per-object frames (MinAtar's) coloured with MinAtar's own palette, each cell a square of
    ``cell`` pixels: a cell shows the colour of its highest lit channel, black where none is."""

    fps = 10.0  # MinAtar's steps are coarse: a tenth of a second each reads as play
    needs_states = False
    slow = False

    def __init__(self, channels: int, cell: int) -> None:
        import seaborn  # MinAtar's own dependency, for the palette its display uses

        self.colours = np.array([(0, 0, 0), *seaborn.color_palette("cubehelix", channels)]) * 255
        self.colours = self.colours.round().astype(np.uint8)
        self.cell = cell

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """(steps + 1, 10 * cell, 10 * cell, 3): one colour per cell, in a batch."""
        grid = np.concatenate([obs, last_obs[None]]).astype(bool)  # (steps + 1, channels, 10, 10)
        index = (grid * np.arange(1, grid.shape[1] + 1)[:, None, None]).max(1)
        return self.colours[index].repeat(self.cell, axis=1).repeat(self.cell, axis=2)


class NewestFrames:
    """Image observations as the agent sees them: the newest frame of each stack (grey), each pixel a square
    of ``scale`` pixels."""

    needs_states = False
    slow = False

    def __init__(self, fps: float, scale: int) -> None:
        self.fps, self.scale = fps, scale

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """(steps + 1, H * scale, W * scale, 3): the last channel of each observation, grey."""
        newest = np.concatenate([obs[:, -1], last_obs[None, -1]])
        return np.repeat(newest[..., None], 3, axis=-1).repeat(self.scale, axis=1).repeat(self.scale, axis=2)


def without_shadows(env: gym.Env) -> None:
    """Draw ``env`` (a MuJoCo env) without shadows and reflections: software rendering (Mesa's, through EGL)
    then takes about a third of the time a frame, and a person judging motion misses neither."""
    model = env.unwrapped.model
    model.light_castshadow[:] = 0
    model.mat_reflectance[:] = 0


def close_if_alive(env: weakref.ref[gym.Env]) -> None:
    """Close the env if nothing has collected it yet."""
    if (alive := env()) is not None:
        alive.close()


class PhysicsFrames:
    """A MuJoCo env's own renders, headless (EGL), with the env put in each recorded physics state: every
    ``stride``-th step, so that clips play at about ``fps`` in real time (a person sees no more; each frame
    costs tens of milliseconds on a CPU). Fragments without recorded states (a dataset's) are drawn from their
    observations where those hold the physics state (:class:`~rlhp.envs.states.ObservedPhysics`)."""

    needs_states = True
    slow = True

    def __init__(self, env: GymEnv, width: int, fps: float = 25.0) -> None:
        self.option = env
        self.env = env.make_single(render_mode="rgb_array", width=width, height=width // 4 * 3)
        obs, _ = self.env.reset(seed=0)
        self.observed: ObservedPhysics | None = None
        if has_physics(self.env):  # gymnasium's MuJoCo envs; others keep their lights as they are
            without_shadows(self.env)
            self.observed = observed_physics(self.env, obs)
        native = float(self.env.metadata.get("render_fps", fps))  # steps a second of the env's own time
        self.stride = max(1, round(native / fps))
        self.fps = native / self.stride
        self.closes_at_exit = False

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """Every ``stride``-th state (from the observations where none were recorded), and the last, rendered."""
        if not states.shape[-1]:
            if self.observed is None:
                raise ValueError("these fragments carry no physics states, and the env's observations do not hold "
                                 "them: the env did not record them")
            states = self.observed.states(np.concatenate([obs, last_obs[None]]))
        shots = []
        for i in sorted({*range(0, len(states), self.stride), len(states) - 1}):
            self.option.write_state(self.env, states[i])
            shots.append(self.env.render())
        if not self.closes_at_exit:
            # MuJoCo's first render registers EGL's end at the interpreter's exit; a renderer freed after that
            # prints a traceback as the run ends. Exit handlers run last-registered first: this one before EGL's.
            atexit.register(close_if_alive, weakref.ref(self.env))  # a weak one: drawers come and go in a process
            self.closes_at_exit = True
        return np.stack(shots)


class ScreenFrames:
    """The fallback for an env that renders but whose steps cannot be drawn again: the screens it rendered
    while sampling (recorded only when people label, at most 320 px wide), as they were."""

    needs_states = True
    slow = False

    def __init__(self, env: GymEnv) -> None:
        probe = env.make_single(render_mode="rgb_array")
        probe.reset(seed=0)
        self.shape = shrunk_screen(probe.render()).shape
        self.fps = probe.metadata.get("render_fps") or 30  # gymnasium leaves it unset on some envs
        probe.close()

    def frames(self, obs: np.ndarray, acts: np.ndarray, last_obs: np.ndarray, states: np.ndarray) -> np.ndarray:
        """(steps + 1, H, W, 3): the recorded screens."""
        if not states.shape[-1]:
            raise ValueError("these fragments carry no screens: the env did not record them")
        return states.reshape(len(states), *self.shape)


def drawer(env: GymEnv, width: int, fps: float | None = None) -> Drawer:
    """How ``env``'s fragments are drawn for people, in clips at least ``width`` pixels wide before scaling;
    ``fps``: the frame rate wanted where the drawer picks its frames (MuJoCo's), else the clip's own."""
    space = env.observation_space
    if isinstance(env, MinAtarEnv):
        return PaletteFrames(space.shape[0], cell=-(-width // space.shape[2]))  # whole pixels a cell, >= width
    if isinstance(env, AtariEnv):
        return GameFrames(env)
    probe = env.make_single()
    restorable, physics = restorer(probe) is not None, env.restorable(probe)
    renders = "rgb_array" in probe.metadata.get("render_modes", ())
    probe.close()
    if restorable:
        return RestoredFrames(env)
    if physics:
        return PhysicsFrames(env, width, fps or 25.0)
    if renders:
        return ScreenFrames(env)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and space.dtype == np.uint8:
        return NewestFrames(fps=15.0, scale=-(-width // space.shape[2]))  # stacks as Atari's: a step every 4 frames
    names = ", ".join(sorted(c.__name__ for c in RESTORERS))
    raise ConfigError("env.id", f"{env.id} draws no rgb_array pictures, and its observations neither give its whole "
                      f"state nor are images, so rlhp cannot show its fragments to people; human labels work on "
                      f"{names}, on MuJoCo envs, on image observations (env=atari, env=minatar) and on any env that "
                      f"renders rgb_array")


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
        self.drawer = drawer(env, width, fps)
        self.fps = self.drawer.fps if self.drawer.needs_states else fps or self.drawer.fps
        self.width, self.workers = width, workers

    def write(self, pairs: FragmentPairs, names: list[tuple[str, str]], folder: Path) -> None:
        """Write each pair's two clips as ``folder / name`` (rendering here, encoding in parallel)."""
        folder.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(self.workers) as pool:
            jobs: list[Future] = []
            for i, pair_names in enumerate(names):
                for side, name in enumerate(pair_names):
                    if len(jobs) >= 2 * self.workers:  # frames wait in memory only for a free encoder
                        jobs.pop(0).result()
                    shots = self.drawer.frames(pairs.obs[i, side], pairs.acts[i, side],
                                               pairs.next_obs[i, side, -1], pairs.states[i, side])
                    jobs.append(pool.submit(write_video, shots, folder / name, self.fps, self.width))
            for job in jobs:
                job.result()
