"""A factory for vectorised copies of a registered gymnasium env, the base of every ``env`` option."""

from __future__ import annotations

import copy
import inspect
from functools import partial
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from rlhp.envs.states import StateRecorder, has_physics, physics_state, screen_state, set_physics_state
from rlhp.envs.tasks import Task
from rlhp.errors import ArgumentError

MAX_ENVS = 4096
"""The most env copies one VecEnv may hold: they step one after another in Python, so more is a typo."""

VECTORIZE = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}
"""How env copies step: one after another in this process, or each in a subprocess of its own."""


ENV_REWARD = Task()
"""The default task: the env's own reward."""

REFUSALS = (TypeError, ValueError, gym.error.Error)
"""What ``gymnasium.make`` and the envs it makes raise for keyword arguments they refuse."""


FIXED_HORIZON_ADVICE = "use a fixed-horizon env (env=cartpole, or a wrapper that ignores termination)"
"""What makes an env's episodes all one length, where the env offers no argument for it."""


class GymEnv:
    """Builds vectorised copies of a registered gymnasium environment.

    Args:
        id: gymnasium id, e.g. ``Pendulum-v1``.
        n_envs: number of parallel copies in the training VecEnv.
        max_episode_steps: overrides the id's time limit when set.
        kwargs: keyword arguments passed to ``gymnasium.make``.
        vectorize: ``dummy`` steps the copies one after another in this process; ``subproc`` gives each a
            process (SB3's SubprocVecEnv), which pays where a step costs more than the hand-off (Atari on
            many cores).
        task: what the true reward is (:mod:`rlhp.envs.tasks`): the env's own, or a behaviour's that
            replaces it in every copy (the ``task`` config group).
    """

    longest_episode: ClassVar[int | None] = None
    """The steps an env of this option runs at most whatever its time limit (its own inner limit, DMC's and
    Meta-World's); None: ``max_episode_steps`` may set any."""

    frame_stack: ClassVar[int] = 1
    """Observations are stacks of this many consecutive frames (1: they are not), stored as their frames."""

    def __init__(self, id: str, n_envs: int = 8, max_episode_steps: int | None = None,
                 kwargs: dict[str, Any] | None = None, vectorize: str = "dummy", task: Task = ENV_REWARD) -> None:
        if not isinstance(id, str) or not id:
            raise ArgumentError("id", "is required, e.g. `env=gym env.id=Pendulum-v1`")
        if not 1 <= n_envs <= MAX_ENVS:
            raise ArgumentError("n_envs", f"must lie in [1, {MAX_ENVS}], got {n_envs}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ArgumentError("max_episode_steps", f"must be at least 1 (or null), got {max_episode_steps}")
        cap = self.longest_episode
        if max_episode_steps is not None and cap is not None and max_episode_steps > cap:
            raise ArgumentError("max_episode_steps", f"must be at most a task's own {cap} steps (or null), got "
                                f"{max_episode_steps}")
        if vectorize not in VECTORIZE:
            raise ArgumentError("vectorize", f"must be one of {sorted(VECTORIZE)}, got {vectorize!r}")
        self.register()
        self.id = self.registered_id(id)
        try:
            gym.spec(self.id)
        except gym.error.Error as err:
            raise ArgumentError("id", f"{id!r} is not a registered gymnasium id ({err}); check the spelling") from None
        self.n_envs = n_envs
        self.max_episode_steps = max_episode_steps
        self.kwargs = dict(kwargs or {})
        self.vectorize = vectorize
        self.task = task
        self.recording = False
        self.observation_space, self.action_space = self._probe()

    def _probe(self) -> tuple[gym.Space, gym.Space]:
        """The spaces of a copy made and closed here, so that options the env refuses are named now, by key."""
        try:
            probe = self.make_single()
        except ArgumentError:  # a rule of this option or of its task, already named by key
            raise
        except REFUSALS as err:
            for key, value in self.kwargs.items():  # which one: the env's own message seldom says
                try:
                    self.build({key: value}, None).close()
                except REFUSALS as alone:
                    raise ArgumentError(f"kwargs.{key}", f"is refused by {self.id}: {alone}") from None
            raise ArgumentError("kwargs", f"are refused by {self.id}: {err}") from None
        self.keeps_going_kwarg = self._keeps_going_kwarg(probe)
        probe.close()
        return probe.observation_space, probe.action_space

    FIXED_HORIZON_KWARGS = ("terminate_when_unhealthy",)
    """Constructor arguments that, set to false, keep an env's episodes going to its time limit (MuJoCo's)."""

    def _keeps_going_kwarg(self, probe: gym.Env) -> str | None:
        """The argument of ``FIXED_HORIZON_KWARGS`` this env takes and is not given false yet, if any."""
        taken = inspect.signature(type(probe.unwrapped).__init__).parameters
        return next((k for k in self.FIXED_HORIZON_KWARGS if k in taken and self.kwargs.get(k) is not False), None)

    @property
    def fixed_horizon_remedy(self) -> str:
        """What makes this env's episodes all run to the time limit, for a message to a user."""
        if self.keeps_going_kwarg is not None:
            return f"add +env.kwargs.{self.keeps_going_kwarg}=false ({self.id}'s episodes then run to the time limit)"
        return FIXED_HORIZON_ADVICE

    def record_states(self) -> None:
        """From now on, copies record the state of every step (:meth:`read_state`), for clips drawn later."""
        self.recording = True

    def unrecorded(self) -> GymEnv:
        """The same env option, its copies recording nothing (for evaluation: no clips are drawn of it)."""
        twin = copy.copy(self)
        twin.recording = False
        return twin

    def restorable(self, env: gym.Env) -> bool:
        """Whether a copy's steps can be drawn again from a state :meth:`write_state` puts it in (a MuJoCo
        env's physics), rather than kept as the screens it rendered."""
        return has_physics(env)

    def read_state(self, env: gym.Env) -> np.ndarray:
        """What a copy needs to draw a step again: its physics state where restorable, else its screen."""
        return physics_state(env) if self.restorable(env) else screen_state(env)

    def write_state(self, env: gym.Env, state: np.ndarray) -> None:
        """Put a copy in ``state`` (from :meth:`read_state` of a restorable env), to draw it."""
        set_physics_state(env, state)

    def register(self) -> None:
        """Have the package that owns this option's ids register them in this process (here gymnasium's own)."""

    def registered_id(self, id: str) -> str:
        """The gymnasium id that ``id`` names (options with short names, e.g. MinAtar's, expand it)."""
        return id

    @property
    def horizon(self) -> int | None:
        """The longest an episode can run, in agent steps (None: no time limit)."""
        if self.max_episode_steps is not None:
            return self.max_episode_steps
        return gym.spec(self.id).max_episode_steps or self.longest_episode

    def make_single(self, **overrides: Any) -> gym.Env:
        """One copy, wrapped as the agent sees it; ``overrides`` go to ``gymnasium.make``, and
        ``max_episode_steps`` (there or in the config) sets the time limit."""
        self.register()  # also in a subprocess that builds its copy (vectorize=subproc)
        # A recording copy can draw itself: the fallback state is its screen; MuJoCo's and ALE's renderers
        # start only when asked for a picture, so the others pay nothing for it.
        kwargs = {**self.kwargs, **({"render_mode": "rgb_array"} if self.recording else {}), **overrides}
        env = self.task.wrap(self.build(kwargs, kwargs.pop("max_episode_steps", self.max_episode_steps)))
        return StateRecorder(env, self.read_state) if self.recording else env

    def build(self, kwargs: dict[str, Any], max_episode_steps: int | None) -> gym.Env:
        """The id's own env with ``kwargs``, its time limit replaced when ``max_episode_steps`` is set."""
        limit = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
        return gym.make(self.id, **kwargs, **limit)

    def make(self, seed: int, n_envs: int | None = None, **overrides: Any) -> VecEnv:
        """Seeded copies with a Monitor around each (outside every wrapper, so it counts the agent's episodes);
        ``overrides`` go to :meth:`make_single`."""
        return make_vec_env(partial(self.make_single, **overrides), n_envs=n_envs or self.n_envs, seed=seed,
                            vec_env_cls=VECTORIZE[self.vectorize])

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """The observation and action spaces, as the agent sees them."""
        return self.observation_space, self.action_space
