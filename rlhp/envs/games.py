"""Games on a fixed horizon: at game over the game starts again inside the same episode.

A game's episode ends when the game is lost, so its length tells how well the agent played: a reward
model that only ever pays a constant would still teach "last longer" through the horizon, and the
preferences would not be what was learned (the ``seals`` Atari variants fix it the same way). Here an
episode is always ``max_episode_steps`` agent steps, and a game that ends inside it restarts at once;
``allow_variable_horizon`` stays the explicit escape for runs that want the game's own episodes (set
``env.continue_after_game_over=false``).
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from rlhp.envs.base import ENV_REWARD, GymEnv
from rlhp.envs.tasks import Task
from rlhp.errors import ArgumentError


class ContinueAfterGameOver(gym.Wrapper):
    """Never ends an episode itself: when the game inside ends, it is reset and play goes on. The step that
    ended a game says so in its info (``game_over``); its observation is the new game's first."""

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """One step; a game that ends here starts again, and the episode goes on."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            obs, _ = self.env.reset()
            info = {**info, "game_over": True}
        return obs, reward, False, False, info


class GameEnv(GymEnv):
    """An env whose episodes end at game over, given a fixed horizon (see the module's docstring).

    Args:
        max_episode_steps: the fixed horizon, in agent steps.
        continue_after_game_over: false keeps the game's own episodes (a variable horizon, which
            ``allow_variable_horizon=true`` must then accept).
        (the rest as :class:`GymEnv`)
    """

    def __init__(self, id: str, n_envs: int = 8, max_episode_steps: int | None = 1000,
                 kwargs: dict[str, Any] | None = None, vectorize: str = "dummy", task: Task = ENV_REWARD,
                 continue_after_game_over: bool = True) -> None:
        if continue_after_game_over and max_episode_steps is None:
            raise ArgumentError("max_episode_steps", "is the fixed horizon of a game that continues after game "
                                "over, so it must be set (or set continue_after_game_over=false)")
        self.continue_after_game_over = continue_after_game_over
        super().__init__(id, n_envs, max_episode_steps, kwargs, vectorize, task)

    def build(self, kwargs: dict[str, Any], max_episode_steps: int | None) -> gym.Env:
        """The game, preprocessed, continued after game over and cut at the horizon, then stacked."""
        env = self.preprocess(gym.make(self.id, **kwargs))
        if self.continue_after_game_over:
            env = ContinueAfterGameOver(env)
        if max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps)
        return self.stack(env)

    def preprocess(self, env: gym.Env) -> gym.Env:
        """What the agent sees of one game step (here the game as it is)."""
        return env

    def stack(self, env: gym.Env) -> gym.Env:
        """Observations stacked over time (here none: one frame is one observation)."""
        return env
