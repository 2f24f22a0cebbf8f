"""The fixed-horizon envs: episodes always run to the time limit, and their rewards say what happened."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlhp.envs import FIXED_HORIZON_CARTPOLE, FIXED_HORIZON_MOUNTAIN_CAR
from rlhp.feedback.clips import restorer


def run_episode(env: gym.Env, action) -> tuple[list[float], list[bool]]:
    env.reset(seed=0)
    rewards, terminated = [], []
    while True:
        _, reward, term, trunc, _ = env.step(action)
        rewards.append(reward)
        terminated.append(term)
        if term or trunc:
            return rewards, terminated


def test_cartpole_pays_only_while_upright_and_never_ends_early():
    rewards, terminated = run_episode(gym.make(FIXED_HORIZON_CARTPOLE), 0)  # always push left: it falls
    assert len(rewards) == 500 and not any(terminated)
    assert rewards[0] == 1.0 and rewards[-1] == 0.0 and set(rewards) == {0.0, 1.0}


def test_mountain_car_pays_its_bonus_every_step_at_the_goal_and_never_ends_early():
    env = gym.make(FIXED_HORIZON_MOUNTAIN_CAR)
    env.reset(seed=0)
    env.unwrapped.state = np.array([0.5, 0.02])  # past the goal, moving on
    _, reward, terminated, _, _ = env.step(np.array([0.0], np.float32))
    assert reward == 100.0 and not terminated
    rewards, terminated = run_episode(env, np.array([0.0], np.float32))
    assert len(rewards) == 999 and not any(terminated) and max(rewards) == 0.0  # idle: never reaches the goal
    assert restorer(env) is not None  # its clips can be drawn for people
