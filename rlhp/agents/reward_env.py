"""The VecEnv wrapper that hands the agent the learned reward and records the true one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from rlhp.agents.rollout import next_observations, terminations
from rlhp.data import TrajectoryRecorder
from rlhp.rewards import AgentReward


class RewardVecEnvWrapper(VecEnvWrapper):
    """Hands the agent ``reward``'s reward instead of the env's (the env's own, through
    :class:`~rlhp.rewards.EnvReward`, for the ceiling) and records the true-reward episodes.

    The net scores (obs, action, next obs, terminated) of each step, where next obs is the
    episode's last observation (not the reset one) and a time-limit truncation is not a
    termination; the recorder keeps the env's own rewards. Inside :meth:`deferred` the steps are kept and
    scored later in one pass (an on-policy agent's rollout; see ``rlhp.agents.agent.PayRollout``).
    """

    def __init__(self, venv: VecEnv, reward: AgentReward, recorder: TrajectoryRecorder) -> None:
        super().__init__(venv)
        self.reward, self.recorder = reward, recorder
        self.intrinsic: Callable[[np.ndarray], np.ndarray] | None = None
        """While set, the agent gets this reward of the next observations instead (unsupervised pre-training)."""
        self.env_rewards_while_intrinsic: list[np.ndarray] = []
        """The env's own rewards of the steps paid :attr:`intrinsic`, in order (what a buffer of the env's reward
        must hold for them once the pre-training ends)."""
        self._obs: np.ndarray | None = None
        self._acts: np.ndarray | None = None
        self.deferring = False
        """While true (inside :meth:`deferred`), the agent gets 0 a step and :meth:`pay_deferred` pays later."""
        self._pending: list[tuple[np.ndarray, ...]] = []

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
        """Step, then hand the agent its reward instead of the env's."""
        obs, true_rews, dones, infos = self.venv.step_wait()
        next_obs = next_observations(obs, dones, infos)
        if self.intrinsic is not None:
            rews = self.intrinsic(next_obs)
            self.env_rewards_while_intrinsic.append(true_rews)
        elif self.deferring:
            self._pending.append((self._obs, self._acts, next_obs, terminations(dones, infos), true_rews))
            rews = np.zeros(len(true_rews), np.float32)
        else:
            rews = self.reward.agent_reward(self._obs, self._acts, next_obs, terminations(dones, infos), true_rews)
        self.recorder.record(self._obs, self._acts, true_rews, dones, infos, next_obs)
        self._obs = obs
        return obs, rews.astype(np.float32), dones, infos

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """While open, each step's learned reward waits for :meth:`pay_deferred` (the agent gets 0 meanwhile);
        steps left unpaid at its close are dropped."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring, self._pending = False, []

    def pay_deferred(self, max_bytes: int) -> np.ndarray:
        """The reward of every step taken while :attr:`deferring` since the last call, (steps, n_envs), scored in
        batched passes of at most ``max_bytes`` of float input each (an observation and the next per step)."""
        pending, self._pending = self._pending, []
        columns = [np.stack(column) for column in zip(*pending, strict=True)]  # each (steps, n_envs, ...)
        chunk = max(1, max_bytes // (2 * 4 * columns[0][0].size))
        paid = [self.reward.agent_reward(*(c[lo:lo + chunk].reshape(-1, *c.shape[2:]) for c in columns))
                for lo in range(0, len(pending), chunk)]
        return np.concatenate(paid).reshape(len(pending), self.num_envs).astype(np.float32)
