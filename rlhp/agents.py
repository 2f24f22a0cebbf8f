"""The agent trainer: an SB3 algorithm trained on the learned reward, and a trajectory source."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.type_aliases import TrainFrequencyUnit
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from rlhp.config import ConfigError
from rlhp.data import Trajectory, TrajectoryRecorder
from rlhp.data.hub import open_trajectories
from rlhp.data.spaces import space_from_json
from rlhp.envs import GymEnv
from rlhp.rewards import RewardNet

Policy = Callable[[np.ndarray], np.ndarray]


class TrajectorySource(Protocol):
    """Anything the loop can sample trajectories from (an agent, a fixed dataset)."""

    def sample(self, steps: int) -> list[Trajectory]:
        """Trajectories covering at least ``steps`` transitions."""

    def held_out(self, steps: int) -> list[Trajectory]:
        """Trajectories never sampled, to evaluate the learned reward on."""


def _next_obs(obs: np.ndarray, dones: np.ndarray, infos: list[dict]) -> np.ndarray:
    """The observation each step led to: a VecEnv already replaced it by the reset one on done."""
    out = obs.copy()
    for i in np.flatnonzero(dones):
        out[i] = infos[i]["terminal_observation"]
    return out


def _terminated(dones: np.ndarray, infos: list[dict]) -> np.ndarray:
    return dones & ~np.array([i.get("TimeLimit.truncated", False) for i in infos])


def rollout(venv: VecEnv, policy: Policy, steps: int = 0, episodes: int = 0,
            on_episode: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
    """Reset ``venv`` and run ``policy`` until finished episodes cover ``steps`` transitions and
    number at least ``episodes``.

    With ``episodes``, each env copy contributes a fixed share of them, so short episodes are not
    over-represented (the first ``n`` to finish would favour them).
    """
    n = venv.num_envs
    quota = np.full(n, np.iinfo(np.int64).max)
    if episodes:
        quota = episodes // n + (np.arange(n) < episodes % n)
    recorder = TrajectoryRecorder(n)
    kept: list[Trajectory] = []
    covered = 0
    obs = venv.reset()
    while covered < steps or len(kept) < episodes:
        acts = policy(obs)
        next_obs, rews, dones, infos = venv.step(acts)
        ended = recorder.record(obs, acts, rews, dones, infos, _next_obs(next_obs, dones, infos))
        for env, traj in zip(np.flatnonzero(dones), ended):
            if quota[env] > 0:
                quota[env] -= 1
                kept.append(traj)
                covered += len(traj)
                if on_episode:
                    on_episode(traj)
        recorder.pop_finished()
        obs = next_obs
    return kept


def take(trajectories: Iterable[Trajectory], steps: int) -> list[Trajectory]:
    """Trajectories in the given order until they cover ``steps`` transitions (or run out)."""
    out: list[Trajectory] = []
    covered = 0
    for traj in trajectories:
        if covered >= steps:
            break
        out.append(traj)
        covered += len(traj)
    return out


def random_policy(venv: VecEnv) -> Policy:
    """Uniformly random actions from the venv's (seeded) action space."""
    return lambda obs: np.stack([venv.action_space.sample() for _ in range(len(obs))])


class RewardVecEnvWrapper(VecEnvWrapper):
    """Replaces the env's reward by the reward net's and records the true-reward episodes."""

    def __init__(self, venv: VecEnv, reward_net: RewardNet, recorder: TrajectoryRecorder) -> None:
        super().__init__(venv)
        self.reward_net, self.recorder = reward_net, recorder
        self._obs: np.ndarray | None = None
        self._acts: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        """Reset every env; episodes in progress are dropped from the record."""
        self._obs = self.venv.reset()
        self.recorder.reset()
        return self._obs

    def step_async(self, actions: np.ndarray) -> None:
        """Remember the actions, for the reward and the record."""
        self._acts = actions
        self.venv.step_async(actions)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """Step, then hand the agent the learned reward instead of the true one."""
        obs, true_rews, dones, infos = self.venv.step_wait()
        next_obs = _next_obs(obs, dones, infos)
        rews = self.reward_net.agent_reward(self._obs, self._acts, next_obs, _terminated(dones, infos))
        self.recorder.record(self._obs, self._acts, true_rews, dones, infos, next_obs)
        self._obs = obs
        return obs, rews.astype(np.float32), dones, infos


class AgentTrainer:
    """Trains an SB3 agent on the learned reward and samples trajectories of its policy.

    Args:
        algorithm: builds the SB3 algorithm from ``env`` and ``seed`` (a partial from config).
        env: the environment factory.
        reward_net: the learned reward given to the agent.
        seed: seeds the training env, the sampling env and the algorithm.
        rng: random generator for exploration.
        exploration_frac: share of sampled steps that come from the exploration policy.
        switch_prob: per step, the chance that the exploration policy re-chooses its mode.
        random_prob: when it re-chooses, the chance of acting uniformly at random.
    """

    def __init__(self, algorithm: Callable[..., BaseAlgorithm], env: GymEnv, reward_net: RewardNet, seed: int,
                 rng: np.random.Generator, exploration_frac: float = 0.0, switch_prob: float = 0.5,
                 random_prob: float = 0.5) -> None:
        self.recorder = TrajectoryRecorder(env.n_envs)
        self.venv = RewardVecEnvWrapper(env.make(seed), reward_net, self.recorder)
        try:
            self.algorithm = algorithm(env=self.venv, seed=seed)
        except AssertionError as err:  # SB3 asserts the spaces it supports
            raise ConfigError("agent", f"cannot train on env {env.id!r}: {err}. Pick an agent that "
                              f"supports {self.venv.action_space} actions") from None
        # Sampling uses its own envs so that it never cuts the agent's training episodes short.
        self.sample_venv = env.make(seed + 10_000)
        self.sample_venv.action_space.seed(seed)
        self.rng = rng
        self.exploration_frac, self.switch_prob, self.random_prob = exploration_frac, switch_prob, random_prob
        self.last_returns = np.zeros(0)

    @property
    def num_timesteps(self) -> int:
        """Env steps trained so far."""
        return self.algorithm.num_timesteps

    @property
    def rollout_steps(self) -> int:
        """Env steps SB3 collects between updates: it only ever trains whole multiples of this."""
        algo = self.algorithm
        if hasattr(algo, "n_steps"):
            return algo.n_steps * algo.n_envs
        freq = algo.train_freq
        return (freq.frequency if freq.unit == TrainFrequencyUnit.STEP else 1) * algo.n_envs

    def train(self, steps: int) -> int:
        """Train the whole rollouts that fit in ``steps`` env steps; return the steps trained."""
        steps -= steps % self.rollout_steps
        if steps <= 0:
            return 0
        before, finished = self.num_timesteps, len(self.recorder.finished)
        self.algorithm.learn(steps, reset_num_timesteps=False, progress_bar=False)
        self.last_returns = np.array([t.rews.sum() for t in self.recorder.finished[finished:]])
        return self.num_timesteps - before

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """The agent's stochastic action, as during training."""
        return self.algorithm.predict(obs, deterministic=False)[0]

    def exploration_policy(self) -> Policy:
        """A policy that, with ``switch_prob`` per step, re-chooses between the agent and random."""
        random_mode = np.zeros(self.sample_venv.num_envs, dtype=bool)
        act_randomly = random_policy(self.sample_venv)

        def policy(obs: np.ndarray) -> np.ndarray:
            switch = self.rng.random(len(obs)) < self.switch_prob
            random_mode[switch] = self.rng.random(int(switch.sum())) < self.random_prob
            acts = self.policy(obs)
            return np.where(random_mode.reshape(-1, *[1] * (acts.ndim - 1)), act_randomly(obs), acts)

        return policy

    def sample(self, steps: int) -> list[Trajectory]:
        """Freshest training episodes first, topped up by rollouts; a share from exploration."""
        explore = int(round(self.exploration_frac * steps))
        fresh = take(reversed(self.recorder.pop_finished()), steps - explore)
        missing = steps - explore - sum(map(len, fresh))
        if missing > 0:
            fresh += rollout(self.sample_venv, self.policy, missing)
        return fresh + (rollout(self.sample_venv, self.exploration_policy(), explore) if explore else [])

    def held_out(self, steps: int) -> list[Trajectory]:
        """Fresh episodes of the current policy, never trained on."""
        return rollout(self.sample_venv, self.policy, steps)

    def save(self, path: str) -> None:
        """Save the SB3 agent as a ``.zip``."""
        self.algorithm.save(path)


class DatasetSource:
    """Trajectories from a saved dataset, shuffled: reward learning with no agent in the loop.

    Args:
        path: folder written by ``save_to_disk`` (e.g. a run's ``trajectories/``).
        env: the environment the dataset's spaces must match.
        rng: random generator for shuffling.
        held_out_frac: share of episodes never sampled, kept to evaluate the learned reward.
    """

    def __init__(self, path: str, env: GymEnv, rng: np.random.Generator, held_out_frac: float = 0.2) -> None:
        trajectories, meta = open_trajectories(path, key="trajectories.path")
        for key, space in zip(("observation_space", "action_space"), env.spaces()):
            if key in meta and space_from_json(meta[key]) != space:
                raise ConfigError("trajectories.path", f"{path!r} was recorded with {key} "
                                  f"{space_from_json(meta[key])}, but env {env.id!r} has {space}")
            # Datasets from elsewhere (imitation's) carry no spaces: the array shapes must still fit.
            first = trajectories[0].obs if key == "observation_space" else trajectories[0].acts
            if key not in meta and isinstance(first, np.ndarray) and first.shape[1:] != space.shape:
                raise ConfigError("trajectories.path", f"{path!r} has {key[:-6]} of shape {first.shape[1:]} per "
                                  f"step, but env {env.id!r} has {space}")
        order = rng.permutation(len(trajectories))
        n_held = int(round(held_out_frac * len(trajectories)))
        if len(trajectories) - n_held < 1:
            raise ConfigError("trajectories.held_out_frac", f"leaves no episode of {len(trajectories)} to learn from")
        self.trajectories = [trajectories[i] for i in order[n_held:]]
        self._held_out = [trajectories[i] for i in order[:n_held]]
        self.rng = rng

    def sample(self, steps: int) -> list[Trajectory]:
        """Shuffled episodes covering at least ``steps`` transitions (all of them if fewer)."""
        return take((self.trajectories[i] for i in self.rng.permutation(len(self.trajectories))), steps)

    def held_out(self, steps: int) -> list[Trajectory]:
        """The episodes kept out of sampling."""
        return self._held_out
