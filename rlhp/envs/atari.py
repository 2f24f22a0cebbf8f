"""Atari 2600 games from pixels, preprocessed as the field does (Mnih et al. 2015; SB3's AtariWrapper).

Per copy: up to 30 no-op actions at the start of each game, every action repeated for 4 frames with the
last two max-pooled, frames 84x84 grey, and the 4 newest frames stacked channel-first, (4, 84, 84) uint8.
The true reward is the game's score, unclipped; losing a life does not end anything; a game that ends
starts again inside the fixed horizon (see :mod:`rlhp.envs.games`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from rlhp.envs.base import ENV_REWARD
from rlhp.envs.games import GameEnv
from rlhp.envs.tasks import Task
from rlhp.errors import ArgumentError


class AtariEnv(GameEnv):
    """``env=atari env.id=ALE/Pong-v5``: an ALE game (ale-py ships the ROMs), preprocessed and stacked.

    Args:
        noop_max: the most no-op actions at a game's start (a random number of them, so starts differ).
        frame_skip: frames per agent step (the action repeats; the last two are max-pooled).
        screen_size: the side of the square grey frame.
        (the rest as :class:`~rlhp.envs.games.GameEnv`; ``kwargs`` go to ``gymnasium.make``, where
        rlhp's config sets ``frameskip: 1``, since skipping is done here, and no sticky actions)
    """

    frame_stack: ClassVar[int] = 4
    """How many of the newest frames one observation stacks."""

    def __init__(self, id: str, n_envs: int = 8, max_episode_steps: int | None = 4000,
                 kwargs: dict[str, Any] | None = None, vectorize: str = "dummy", task: Task = ENV_REWARD,
                 continue_after_game_over: bool = True, noop_max: int = 30, frame_skip: int = 4,
                 screen_size: int = 84) -> None:
        for name, value, low in (("noop_max", noop_max, 0), ("frame_skip", frame_skip, 1),
                                 ("screen_size", screen_size, 8)):
            if not low <= value <= 1024:
                raise ArgumentError(name, f"must lie in [{low}, 1024], got {value}")
        self.noop_max, self.frame_skip, self.screen_size = noop_max, frame_skip, screen_size
        super().__init__(id, n_envs, max_episode_steps, kwargs, vectorize, task, continue_after_game_over)

    def register(self) -> None:
        """Have ale-py register its games."""
        try:
            import ale_py
        except ImportError:
            raise ArgumentError("id", "needs the Atari games, which come with an extra: pip install "
                                "'rlhp[atari]'") from None
        gym.register_envs(ale_py)

    def preprocess(self, env: gym.Env) -> gym.Env:
        """SB3's Atari preprocessing: no-op starts, frame skip with max-pooling, 84x84 grey, the score kept."""
        skip = {**env.spec.kwargs}.get("frameskip")
        if skip != 1:
            raise ArgumentError("kwargs.frameskip", f"must be 1 (rlhp skips frames itself, frame_skip="
                                f"{self.frame_skip}); {self.id} skips {skip}")
        from stable_baselines3.common.atari_wrappers import AtariWrapper

        return AtariWrapper(KeepGameState(env), noop_max=self.noop_max, frame_skip=self.frame_skip,
                            screen_size=self.screen_size, terminal_on_life_loss=False, clip_reward=False)

    def stack(self, env: gym.Env) -> gym.Env:
        """The newest ``frame_stack`` frames, channel-first: (4, 84, 84)."""
        env = gym.wrappers.FrameStackObservation(env, self.frame_stack)
        space = gym.spaces.Box(0, 255, (self.frame_stack, self.screen_size, self.screen_size), np.uint8)
        return gym.wrappers.TransformObservation(env, _drop_channel_axis, space)  # a function, so copies pickle


class KeepGameState(gym.Wrapper):
    """Pickles with the emulator's state and random generators. ALE's env pickles as its constructor's
    arguments only, so without this a resumed run would find every copy in a fresh game, not where it was."""

    def __getstate__(self) -> dict[str, Any]:
        game = self.env.unwrapped
        return {**self.__dict__, "game_state": game.ale.cloneState(include_rng=True), "np_random": game.np_random}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        game_state, np_random = state.pop("game_state"), state.pop("np_random")
        self.__dict__.update(state)
        game = self.env.unwrapped
        game.ale.restoreState(game_state)
        game.np_random = np_random


def _drop_channel_axis(obs: np.ndarray) -> np.ndarray:
    """(stack, height, width, 1) -> (stack, height, width)."""
    return obs[..., 0]
