"""Meta-World (Yu et al. 2019; version 3) manipulation tasks: ``env=metaworld env.id=door-open-v3``.

One task with its goal sampled anew at every reset, as the preference-based RL papers run it: Meta-World's
``MT1`` draws each episode's object and goal positions from the 50 that it samples for the task (from
``goal_seed``); B-Pref drew fresh ones from the same ranges at every reset. Episodes run their 500 steps and
never stop at success. Each episode reports whether it succeeded at any step (``info["is_success"]`` on its
last step, the convention SB3 reads), the success rate the papers report.

Meta-World places a task's objects and goal in the model itself at reset (bodies' and sites' positions), not in
the joint positions: a step's recorded state holds those positions beside the joints' (and the hand's mocap
target), so its clips for people are drawn again from it, as other MuJoCo envs' are, only for the pairs shown.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlhp.data.trajectory import SUCCESS
from rlhp.envs.base import ENV_REWARD, GymEnv
from rlhp.envs.states import physics_state, set_physics_state
from rlhp.envs.tasks import Task
from rlhp.errors import ArgumentError

MT1 = "Meta-World/MT1"
"""Meta-World's gymnasium id for one task with sampled goals."""

HORIZON = 500
"""The steps of a Meta-World episode (every task's ``max_path_length``)."""

SEEDS = 2**32 - 1
"""The largest goal seed: Meta-World seeds numpy's legacy generator, which takes 32 bits."""


class EpisodeSuccess(gym.Wrapper):
    """Marks an episode's last step with ``info["is_success"]``: whether ``info["success"]`` was true at any of
    its steps (B-Pref's and PEBBLE's measure; Meta-World's own is per step)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.succeeded = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Start an episode that has not succeeded yet."""
        self.succeeded = False
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Step; on the episode's last step, say whether it succeeded."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.succeeded = self.succeeded or bool(info.get("success", False))
        if terminated or truncated:
            info = {**info, SUCCESS: self.succeeded}
        return obs, reward, terminated, truncated, info


PLACED = ("body_pos", "site_pos", "eq_data")
"""The model's arrays Meta-World changes after building it: objects and goals placed at reset, the hand's weld."""


class WholePhysics(gym.Wrapper):
    """Saves the model's arrays that Meta-World changes after building it (:data:`PLACED`: where reset put the
    objects, the hand's weld) with the wrapper's attributes: a checkpoint keeps MuJoCo's integration state
    (``mj_getState``) of every simulation, but a model as its config builds it, so without this a resumed run
    would find the objects where the XML file puts them."""

    def save_state(self) -> dict[str, Any]:
        """The wrapper's attributes, and the model's placements."""
        model = self.env.unwrapped.model
        return {**self.__dict__, "placed": {k: getattr(model, k).copy() for k in PLACED}}

    def load_state(self, state: dict[str, Any]) -> None:
        """Put the placements back as they were saved."""
        state = dict(state)
        model = self.env.unwrapped.model
        for key, array in state.pop("placed").items():
            getattr(model, key)[:] = array
        self.__dict__.update(state)


class MetaWorldEnv(GymEnv):
    """``env=metaworld env.id=door-open-v3``: a Meta-World v3 task, its goal drawn each reset from the 50 that
    ``MT1`` samples from ``goal_seed``; 500-step episodes.

    Args:
        goal_seed: the seed of the task's 50 goals (the same for every copy and every run seed, so that the
            seeds of a run differ in what they learn, not in the goals they face).
        kwargs: the rest of :class:`GymEnv`'s.
    """

    longest_episode = HORIZON

    def __init__(self, id: str, n_envs: int = 1, max_episode_steps: int | None = None,
                 kwargs: dict[str, Any] | None = None, vectorize: str = "dummy", task: Task = ENV_REWARD,
                 goal_seed: int = 0) -> None:
        if not 0 <= goal_seed <= SEEDS:
            raise ArgumentError("goal_seed", f"must lie in [0, {SEEDS}] (a numpy seed), got {goal_seed}")
        self.goal_seed = goal_seed
        super().__init__(id, n_envs, max_episode_steps, kwargs, vectorize, task)

    def register(self) -> None:
        """Have Meta-World register its ids (gymnasium 1.x registers a package's envs at its import)."""
        try:
            import metaworld  # noqa: F401
        except ImportError:
            raise ArgumentError("id", "needs Meta-World, which comes with an extra: pip install "
                                "'rlhp[metaworld]'") from None

    def registered_id(self, id: str) -> str:
        """Every task is made through ``Meta-World/MT1``; the task's own name is checked here."""
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS

        if id not in ALL_V3_ENVIRONMENTS:
            raise ArgumentError("id", f"must be a Meta-World v3 task (e.g. door-open-v3, button-press-v3), got "
                                f"{id!r}; the tasks: {', '.join(sorted(ALL_V3_ENVIRONMENTS))}")
        self.task_name = id
        return MT1

    def build(self, kwargs: dict[str, Any], max_episode_steps: int | None) -> gym.Env:
        """The task through ``MT1``, seeded goals, with each episode's success on its last step."""
        limit = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
        # gymnasium's checker warns on every copy that Meta-World's observations leave the bounds it declares
        # (its hand and objects' ranges are estimates): a known trait of the library, not the user's to fix.
        env = gym.make(MT1, env_name=self.task_name, seed=self.goal_seed, disable_env_checker=True, **kwargs,
                       **limit)
        space = env.observation_space
        flat = gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
        return EpisodeSuccess(gym.wrappers.TransformObservation(WholePhysics(env), _as_float32, flat))

    def read_state(self, env: gym.Env) -> np.ndarray:
        """Where reset put the bodies and sites, the hand's mocap target, then the joints' positions and
        velocities, as one float64 vector."""
        return np.concatenate([*(a.ravel() for a in _placements(env)), physics_state(env)])

    def write_state(self, env: gym.Env, state: np.ndarray) -> None:
        """Put a copy in ``state`` (from :meth:`read_state`): its objects and goal where that episode had them."""
        placed = _placements(env)
        *parts, physics = np.split(state, np.cumsum([a.size for a in placed]))
        for array, part in zip(placed, parts, strict=True):
            array[:] = part.reshape(array.shape)
        set_physics_state(env, physics)


def _placements(env: gym.Env) -> tuple[np.ndarray, ...]:
    """The arrays a recorded state holds beside the joints', in its order: bodies', sites', the mocap target."""
    model, data = env.unwrapped.model, env.unwrapped.data
    return model.body_pos, model.site_pos, data.mocap_pos


def _as_float32(obs: np.ndarray) -> np.ndarray:
    return obs.astype(np.float32)
