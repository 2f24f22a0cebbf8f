"""MinAtar (Young & Tian 2019): five Atari games on a 10x10 grid, cheap enough to learn on a CPU.

An observation is one frame of 10x10 cells with a channel per kind of object (the ball, the paddle, a
trail that shows motion...), so no frames are stacked. rlhp hands them to the agent channel-first as
uint8 0/1, a byte a cell, which SB3 turns into floats without rescaling.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlhp.envs.games import GameEnv
from rlhp.errors import ArgumentError

GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")


class MinAtarEnv(GameEnv):
    """``env=minatar env.id=Breakout``: a MinAtar game (one of :data:`GAMES`, or a full ``MinAtar/<game>-v1``
    id; v1 has each game's minimal action set), on a fixed horizon (see :mod:`rlhp.envs.games`)."""

    def register(self) -> None:
        """Register MinAtar's gymnasium ids (the package registers them only when asked)."""
        try:
            from minatar.gym import register_envs
        except ImportError:
            raise ArgumentError("id", "needs the MinAtar games, which come with an extra: pip install "
                                "'rlhp[minatar]'") from None
        if "MinAtar/Breakout-v1" not in gym.registry:
            register_envs()

    def registered_id(self, id: str) -> str:
        """``Breakout`` -> ``MinAtar/Breakout-v1``."""
        if id in GAMES:
            return f"MinAtar/{id}-v1"
        if id.startswith("MinAtar/"):
            return id
        raise ArgumentError("id", f"must be a MinAtar game, one of {', '.join(GAMES)}, got {id!r}")

    def preprocess(self, env: gym.Env) -> gym.Env:
        """Channel-first uint8 frames: (channels, 10, 10), 0 or 1."""
        height, width, channels = env.observation_space.shape
        space = gym.spaces.Box(0, 1, (channels, height, width), np.uint8)
        return gym.wrappers.TransformObservation(env, _channels_first, space)


def _channels_first(obs: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(obs.transpose(2, 0, 1), dtype=np.uint8)

