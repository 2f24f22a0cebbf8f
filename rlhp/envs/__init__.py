"""Environments: the ``env`` options (any gymnasium id, Atari and MinAtar games, DeepMind Control, Meta-World)
and fixed-horizon variants."""

import gymnasium as gym

from rlhp.envs.atari import AtariEnv
from rlhp.envs.base import MAX_ENVS, VECTORIZE, GymEnv
from rlhp.envs.classic import FIXED_HORIZON_CARTPOLE, FIXED_HORIZON_MOUNTAIN_CAR
from rlhp.envs.dmc import DmcEnv
from rlhp.envs.games import ContinueAfterGameOver, GameEnv
from rlhp.envs.metaworld import MetaWorldEnv
from rlhp.envs.minatar import MinAtarEnv

FIXED_HORIZON_INVERTED_DOUBLE_PENDULUM = "rlhp/InvertedDoublePendulum-FixedHorizon-v5"
"""InvertedDoublePendulum-v5 without early termination (:mod:`rlhp.envs.mujoco`; needs ``rlhp[mujoco]``)."""

gym.register(FIXED_HORIZON_INVERTED_DOUBLE_PENDULUM, max_episode_steps=1000,
             entry_point="rlhp.envs.mujoco:FixedHorizonInvertedDoublePendulum")

__all__ = ["FIXED_HORIZON_CARTPOLE", "FIXED_HORIZON_INVERTED_DOUBLE_PENDULUM", "FIXED_HORIZON_MOUNTAIN_CAR", "MAX_ENVS",
           "VECTORIZE", "AtariEnv", "ContinueAfterGameOver", "DmcEnv", "GameEnv", "GymEnv", "MetaWorldEnv",
           "MinAtarEnv"]
