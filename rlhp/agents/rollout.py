"""Running a policy in a vectorised env and cutting the steps into whole episodes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from rlhp.agents.policies import Policy
from rlhp.data import Trajectory, TrajectoryRecorder


def next_observations(obs: np.ndarray, dones: np.ndarray, infos: list[dict]) -> np.ndarray:
    """The observation each step led to: a VecEnv already replaced it by the reset one on done."""
    out = obs.copy()
    for i in np.flatnonzero(dones):
        out[i] = infos[i]["terminal_observation"]
    return out


def terminations(dones: np.ndarray, infos: list[dict]) -> np.ndarray:
    """Which of the ``dones`` ended by termination: a time-limit truncation is not the end of the task."""
    return dones & ~np.array([i.get("TimeLimit.truncated", False) for i in infos])


def rollout(venv: VecEnv, policy: Policy, steps: int = 0, episodes: int = 0,
            on_episode: Callable[[Trajectory], None] | None = None, frame_stack: int = 1) -> list[Trajectory]:
    """Reset ``venv`` and run ``policy`` until finished episodes cover ``steps`` transitions and
    number at least ``episodes``.

    With ``episodes``, each env copy contributes a fixed share of them, so short episodes are not
    over-represented (the first ``n`` to finish would favour them). ``frame_stack``: the env's observations
    are stacks of this many frames (see :class:`TrajectoryRecorder`).
    """
    n = venv.num_envs
    quota = np.full(n, np.iinfo(np.int64).max)
    if episodes:
        quota = episodes // n + (np.arange(n) < episodes % n)
    recorder = TrajectoryRecorder(n, frame_stack)
    kept: list[Trajectory] = []
    covered = 0
    obs = venv.reset()
    while covered < steps or len(kept) < episodes:
        acts = policy(obs)
        next_obs, rews, dones, infos = venv.step(acts)
        ended = recorder.record(obs, acts, rews, dones, infos, next_observations(next_obs, dones, infos))
        for env, traj in zip(np.flatnonzero(dones), ended):
            if quota[env] > 0:
                quota[env] -= 1
                kept.append(traj)
                covered += len(traj)
                if on_episode:
                    on_episode(traj)
        recorder.pop_finished()
        obs = next_obs
    return kept
