"""One episode of experience, and a recorder that cuts a VecEnv's steps into episodes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlhp.data.frames import frames_of, shared, stacks
from rlhp.data.state import record

STATE, FINAL_STATE = "recorded_state", "final_recorded_state"
"""Info keys an env that records its states fills (:mod:`rlhp.envs.states`): the state a step starts from,
and on an episode's last step the state it ends in; a trajectory holds them in ``states``."""

SUCCESS = "is_success"
"""The info key of an episode's last step that says whether the episode succeeded (SB3's convention; rlhp's
Meta-World option sets it)."""

Nested = np.ndarray | dict[str, "Nested"] | tuple["Nested", ...]
"""An array with a leading time axis, or a dict/tuple of them (Dict and Tuple spaces)."""


@record
@dataclass
class Trajectory:
    """One episode: ``obs`` has one more row than ``acts`` and ``rews`` (the final observation).

    ``rews`` are the environment's true rewards; ``terminal`` is True when the episode ended
    by termination rather than by a time limit or by being cut off. ``episode`` is its row in the
    dataset it was loaded from (-1 otherwise) and ``rank`` its quality rank there (0 = worst), if any.
    With ``frame_stack`` > 1 each observation is a stack of that many consecutive frames (Atari), and ``obs``
    is a read-only view over the episode's frames, each held once (``len + frame_stack`` of them).
    ``states`` holds, where the env recorded them (:mod:`rlhp.envs.states`), the state behind each
    observation, (len + 1, state size); else it is (len + 1, 0). It is for drawing clips, and is not saved
    in datasets.
    """

    obs: Nested
    acts: Nested
    rews: np.ndarray
    terminal: bool
    infos: list[dict] = field(default_factory=list)
    episode: int = -1
    rank: float | None = None
    frame_stack: int = 1
    states: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.states is None:  # none recorded: no columns, one row per observation all the same
            self.states = np.zeros((len(self.rews) + 1, 0))
        if self.frame_stack > 1:
            self.obs = shared(self.obs, axis=0)

    @property
    def frames(self) -> np.ndarray:
        """The frames under ``obs`` (``obs`` itself without stacking): what is stored."""
        return frames_of(self.obs, axis=0) if self.frame_stack > 1 else self.obs

    def __len__(self) -> int:
        """Number of transitions."""
        return len(self.rews)

    def save_state(self) -> dict[str, Any]:
        """Its frames once each, and its infos packed (:class:`PackedInfos`)."""
        return {**self.__dict__, "obs": self.frames, "infos": PackedInfos(self.infos)}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back :meth:`save_state`'s (the stacks as views over the frames again)."""
        k = state["frame_stack"]
        self.__dict__.update(state, infos=state["infos"].unpack(),
                             obs=stacks(state["obs"], k, axis=0) if k > 1 else state["obs"])


@record
class PackedInfos:
    """Per-step infos as their distinct dicts and, per step, which one: how a checkpoint holds them. Most steps
    repeat a few dicts (``{"TimeLimit.truncated": False}``), and the distinct ones and an index are a fraction
    of a dict, key and value per step."""

    def __init__(self, infos: list[dict]) -> None:
        index: dict = {}
        self.distinct: list[dict] = []
        self.order = np.empty(len(infos), np.int64)
        for i, info in enumerate(infos):
            try:  # the types too: {"x": 1} and {"x": True} are equal, yet not the same info
                key = tuple((k, type(v), v) for k, v in info.items())
                hash(key)
            except TypeError:  # an unhashable value: this dict stands alone
                key = ("id", id(info))
            j = index.setdefault(key, len(self.distinct))
            if j == len(self.distinct):
                self.distinct.append(info)
            self.order[i] = j

    def unpack(self) -> list[dict]:
        """The infos, each step's its own dict again."""
        return [dict(self.distinct[j]) for j in self.order]


class TrajectoryRecorder:
    """Collects the steps of a vectorised env and emits each finished episode.

    Steps are stored as whole (n_envs, ...) batches, one append per step; an episode's rows
    are gathered from those batches only when it ends. With ``frame_stack`` > 1 (observations are stacks of
    consecutive frames) a step keeps only its newest frame, and an episode's first stack keeps the rest.
    """

    def __init__(self, n_envs: int, frame_stack: int = 1) -> None:
        self.n_envs = n_envs
        self.frame_stack = frame_stack
        self.finished: list[Trajectory] = []
        self.reset()

    def reset(self) -> None:
        """Forget the episodes in progress (the envs were reset); finished ones are kept."""
        self._obs: list[np.ndarray] = []
        self._acts: list[np.ndarray] = []
        self._rews: list[np.ndarray] = []
        self._infos: list[list[dict]] = []
        self._start = np.zeros(self.n_envs, dtype=np.int64)
        self._offset = 0  # absolute index of the first stored step
        self._heads: np.ndarray | None = None  # per env, the older frames of its episode's first stack
        self._last: np.ndarray | None = None  # the previous step's observations, to check the stacks follow on

    def record(
        self,
        obs: np.ndarray,
        acts: np.ndarray,
        rews: np.ndarray,
        dones: np.ndarray,
        infos: list[dict],
        next_obs: np.ndarray,
    ) -> list[Trajectory]:
        """Store one step of every env; return the episodes that ended with it."""
        now = self._offset + len(self._acts)
        if self.frame_stack > 1:
            self._keep_frames(obs, self._start == now)
        self._obs.append(obs[:, -1].copy() if self.frame_stack > 1 else obs)
        self._acts.append(acts)
        self._rews.append(np.asarray(rews, dtype=np.float32))
        self._infos.append(infos)
        ended = []
        done_envs = np.flatnonzero(dones)
        if len(done_envs):
            first = int(self._start[done_envs].min() - self._offset)
            obs_block = np.stack(self._obs[first:])
            acts_block = np.stack(self._acts[first:])
            rews_block = np.stack(self._rews[first:])
        for env in done_envs:
            lo = int(self._start[env] - self._offset)
            seen = obs_block[lo - first:, env]
            ended.append(Trajectory(
                obs=self._episode_obs(env, seen, next_obs[env]),
                acts=acts_block[lo - first:, env].copy(),
                rews=rews_block[lo - first:, env].copy(),
                terminal=not infos[env].get("TimeLimit.truncated", False),
                infos=[_without_copies(step[env]) for step in self._infos[lo:]],
                frame_stack=self.frame_stack,
                states=_states(self._infos[lo:], env),
            ))
            self._start[env] = now + 1
        if len(ended):
            self._trim()
        self.finished.extend(ended)
        return ended

    def _keep_frames(self, obs: np.ndarray, fresh: np.ndarray) -> None:
        """Keep the older frames of each first stack; check every other stack follows on from the last."""
        if self._heads is None:
            self._heads = np.empty_like(obs[:, :-1])
        self._heads[fresh] = obs[fresh, :-1]
        going = ~fresh
        if self._last is not None and not np.array_equal(obs[going, :-1], self._last[going, 1:]):
            raise ValueError(f"the env's observations are not stacks of {self.frame_stack} consecutive frames "
                             "(a stack is the one before it, shifted by one new frame)")
        self._last = obs

    def _episode_obs(self, env: int, seen: np.ndarray, final: np.ndarray) -> np.ndarray:
        """An ended episode's observations from its steps' stored rows and its final observation."""
        if self.frame_stack == 1:
            return np.concatenate([seen, final[None]])
        return stacks(np.concatenate([self._heads[env], seen, final[-1:]]), self.frame_stack, axis=0)

    def _trim(self) -> None:
        drop = int(self._start.min() - self._offset)
        if drop > 0:
            del self._obs[:drop], self._acts[:drop], self._rews[:drop], self._infos[:drop]
            self._offset += drop

    def save_state(self) -> dict[str, Any]:
        """The steps in progress as whole arrays and packed infos: a few values to save, not several per step."""
        steps = len(self._acts)
        return {**self.__dict__, **{k: np.stack(getattr(self, k)) if steps else [] for k in ("_obs", "_acts", "_rews")},
                "_infos": PackedInfos([info for step in self._infos for info in step])}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back :meth:`save_state`'s (a list of steps again)."""
        infos = state["_infos"].unpack()
        self.__dict__.update(state, **{k: list(state[k]) for k in ("_obs", "_acts", "_rews")},
                             _infos=[infos[i:i + state["n_envs"]] for i in range(0, len(infos), state["n_envs"])])

    def pop_finished(self) -> list[Trajectory]:
        """Return and forget the finished episodes, oldest first."""
        out, self.finished = self.finished, []
        return out


_HELD_ELSEWHERE = frozenset({"terminal_observation", STATE, FINAL_STATE})
"""Info keys whose values a trajectory holds in its own arrays (the final observation, recorded states)."""


def _without_copies(info: dict) -> dict:
    """The step's info minus what the trajectory holds elsewhere."""
    return {k: v for k, v in info.items() if k not in _HELD_ELSEWHERE} if _HELD_ELSEWHERE & info.keys() else info


def _states(steps: list[list[dict]], env: int) -> np.ndarray | None:
    """An ended episode's recorded states from its steps' infos, None when the env recorded none."""
    if STATE not in steps[0][env]:
        return None
    return np.stack([step[env][STATE] for step in steps] + [steps[-1][env][FINAL_STATE]])


def successes(episodes: list[Trajectory]) -> np.ndarray:
    """Whether each episode succeeded, for the episodes whose env says so on their last step (none elsewhere)."""
    return np.array([bool(t.infos[-1][SUCCESS]) for t in episodes if t.infos and SUCCESS in t.infos[-1]], bool)


def digest(trajectories: list[Trajectory]) -> str:
    """A content hash of the trajectories' observations, actions and rewards (to tell a changed dataset)."""
    h = hashlib.blake2b(digest_size=16)

    def feed(x: Nested) -> None:
        if isinstance(x, dict):
            for key in sorted(x):
                h.update(key.encode())
                feed(x[key])
        elif isinstance(x, tuple):
            for part in x:
                feed(part)
        else:
            h.update(np.ascontiguousarray(x).data)

    for t in trajectories:
        feed(t.obs), feed(t.acts), feed(t.rews)
    return h.hexdigest()
