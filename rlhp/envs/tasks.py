"""Tasks: what a run's true reward is. The env's own reward, or a behaviour that no env rewards (a backflip).

The task is part of the env, so that everything that speaks of the true reward agrees on it: the synthetic
teacher prefers it, the final evaluation and the reward correlation measure it, and the true-reward ceiling
(``reward_learning=none``) trains the same agent on it. A behaviour's reward is computed from the env's own
state, read after reset and after each step (:meth:`Behaviour.measure`), so it may use what the observation
leaves out (a MuJoCo body's position, its full rotation).
"""

from __future__ import annotations

import math
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlhp.errors import ArgumentError


class Task:
    """The env's own reward: env copies are left as they are."""

    instructions: str = ""
    """What people labelling this task are asked, when the run gives no ``querent.instructions`` (Markdown)."""

    def wrap(self, env: gym.Env) -> gym.Env:
        """``env`` with this task's reward."""
        return env


class Behaviour(Task):
    """A reward for a behaviour, from a quantity read off the env after reset and after every step.

    Subclasses say what they read (:meth:`measure`, which may refuse an env it cannot read, naming the
    argument) and what a step from one reading to the next is worth (:meth:`reward`).
    """

    def wrap(self, env: gym.Env) -> gym.Env:
        """``env`` with its reward replaced by this behaviour's."""
        try:  # the wrapper's first reading refuses an env it cannot read, when the run starts, by the task's key
            return BehaviourReward(env, self)
        except ArgumentError as err:
            env.close()
            raise ArgumentError(f"task.{err.argument}", err.problem) from None

    def measure(self, env: gym.Env) -> np.ndarray:
        """What the reward is computed from, read off the unwrapped env."""
        raise NotImplementedError

    def reward(self, before: np.ndarray, after: np.ndarray) -> float:
        """What a step from reading ``before`` to ``after`` is worth."""
        raise NotImplementedError


class BehaviourReward(gym.Wrapper):
    """Replaces the env's reward by a behaviour's, computed from the env's state before and after each step."""

    def __init__(self, env: gym.Env, behaviour: Behaviour) -> None:
        super().__init__(env)
        self.behaviour = behaviour
        self._last = behaviour.measure(env.unwrapped)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Reset, and read the behaviour's starting point."""
        out = self.env.reset(**kwargs)
        self._last = self.behaviour.measure(self.env.unwrapped)
        return out

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Step; the reward is the behaviour's for the step."""
        obs, _, terminated, truncated, info = self.env.step(action)
        now = self.behaviour.measure(self.env.unwrapped)
        reward = self.behaviour.reward(self._last, now)
        self._last = now
        return obs, reward, terminated, truncated, info


BACKFLIP = ("**Teach a backflip.** Prefer the clip in which the body turns further **backwards** (its top "
            "moving against the way it faces). More backward turning is better; turning forwards or staying upright "
            "is worse than any backward turn.")
"""What people teaching a backflip are asked."""


class Backflip(Behaviour):
    """Backward rotation of a MuJoCo body about its pitch hinge, in turns: an episode's return counts the
    backflips it made (net of forward rotation), so a return of 1 is one full backward rotation.

    Args:
        joint: the hinge joint whose angle is the body's pitch (``rooty`` for Hopper, HalfCheetah, Walker2d).
        instructions: what people labelling it are asked.
    """

    def __init__(self, joint: str = "rooty", instructions: str = BACKFLIP) -> None:
        self.joint, self.instructions = joint, instructions

    def measure(self, env: gym.Env) -> np.ndarray:
        """The pitch angle, in radians, never wrapped (it grows by 2 pi a turn)."""
        model = getattr(env, "model", None)
        if model is None or not hasattr(env, "data"):
            raise ArgumentError("joint", f"needs a MuJoCo env to read the {self.joint!r} joint from; "
                                f"{type(env).__name__} is not one (e.g. env=gym env.id=Hopper-v5)")
        try:
            address = model.joint(self.joint).qposadr[0]
        except KeyError:
            names = [model.joint(i).name for i in range(model.njnt)]
            raise ArgumentError("joint", f"{type(env).__name__} has no joint {self.joint!r}; its joints are "
                                f"{', '.join(names)}") from None
        return np.array(env.data.qpos[address])

    def reward(self, before: np.ndarray, after: np.ndarray) -> float:
        """Backward rotation in the step, in turns (a positive pitch leans forward: its top moves to +x)."""
        return float(before - after) / (2 * math.pi)
