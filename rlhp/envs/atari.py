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

CONSOLE_HZ = 60
"""Frames an Atari 2600 draws a second (NTSC); ALE's ``render_fps`` metadata is a display rate, not this."""

STATE_BYTES = 16384
"""The width of a recorded emulator state: its length (4 bytes), then ALE's serialisation (14.4 kB, give or
take 30 bytes as its numbers are written as text), then zeros; every step's state has the same width."""


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

    def read_state(self, env: gym.Env) -> np.ndarray:
        """The console's emulator state with its random generator (sticky actions draw from it), serialised in
        :data:`STATE_BYTES` (two 84x84 frames' worth): :func:`replay` draws the step that starts from it."""
        data = env.unwrapped.ale.cloneState(include_rng=True).serialize()
        if len(data) > STATE_BYTES - 4:
            raise ValueError(f"{self.id}'s emulator state takes {len(data)} bytes, over {STATE_BYTES - 4}")
        state = np.zeros(STATE_BYTES, np.uint8)
        state[:4] = np.frombuffer(np.uint32(len(data)).tobytes(), np.uint8)
        state[4:4 + len(data)] = np.frombuffer(data, np.uint8)
        return state

    def stack(self, env: gym.Env) -> gym.Env:
        """The newest ``frame_stack`` frames, channel-first: (4, 84, 84)."""
        env = gym.wrappers.FrameStackObservation(env, self.frame_stack)
        space = gym.spaces.Box(0, 255, (self.frame_stack, self.screen_size, self.screen_size), np.uint8)
        return gym.wrappers.TransformObservation(env, _drop_channel_axis, space)  # a function, so copies pickle


class KeepGameState(gym.Wrapper):
    """Saves the emulator's state and random generators with its wrapper's: ALE's emulator is a C++ object with no
    attributes to save, so without this a resumed run would find every copy in a fresh game, not where it was."""

    def save_state(self) -> dict[str, Any]:
        """The wrapper's attributes, and the emulator's state (its random generator's too) as bytes."""
        return {**self.__dict__, "game_state": self.env.unwrapped.ale.cloneState(include_rng=True).serialize()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Put the emulator back as it was saved."""
        import ale_py

        state = dict(state)
        game_state = state.pop("game_state")
        self.__dict__.update(state)
        self.env.unwrapped.ale.restoreState(ale_py.ALEState(game_state))


def replay(env: gym.Env, state: np.ndarray, action: int, frame_skip: int) -> np.ndarray:
    """The colour screen after an agent step, replayed on ``env`` (a copy made with ``render_mode="rgb_array"``)
    from the emulator ``state`` it started in (:meth:`AtariEnv.read_state`): the console is deterministic, so
    this is the screen the agent's copy showed, where the agent's frames are grey, 84x84 and max-pooled."""
    import ale_py

    game = env.unwrapped
    size = int(state[:4].view(np.uint32)[0])
    game.ale.restoreState(ale_py.ALEState(state[4:4 + size].tobytes()))
    for _ in range(frame_skip):
        if game.step(action)[2]:  # the game ended inside the step, as the agent's copy stopped skipping
            break
    return game.render()


def _drop_channel_axis(obs: np.ndarray) -> np.ndarray:
    """(stack, height, width, 1) -> (stack, height, width)."""
    return obs[..., 0]
