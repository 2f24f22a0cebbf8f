"""Environments: the ``env`` options (any gymnasium id, Atari and MinAtar games) and fixed-horizon classics."""

from rlhp.envs.atari import AtariEnv
from rlhp.envs.base import MAX_ENVS, VECTORIZE, GymEnv
from rlhp.envs.classic import FIXED_HORIZON_CARTPOLE, FIXED_HORIZON_MOUNTAIN_CAR
from rlhp.envs.games import ContinueAfterGameOver, GameEnv
from rlhp.envs.minatar import MinAtarEnv

__all__ = ["FIXED_HORIZON_CARTPOLE", "FIXED_HORIZON_MOUNTAIN_CAR", "MAX_ENVS", "VECTORIZE", "AtariEnv",
           "ContinueAfterGameOver", "GameEnv", "GymEnv", "MinAtarEnv"]
