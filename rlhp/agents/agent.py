"""The agent trainer: an SB3 algorithm trained on the learned reward, sampled for fragments."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.type_aliases import TrainFrequencyUnit

from rlhp.agents.base import Agent, AgentReport, TrajectorySource, take
from rlhp.agents.critic_reset import can_restart_critic, restart_critic
from rlhp.agents.domains import check_buffer_memory, check_domains, check_rollout_batch
from rlhp.agents.exploration import StateEntropyReward
from rlhp.agents.policies import GaussianActionNoise, mixed_policy
from rlhp.agents.reward_env import RewardVecEnvWrapper
from rlhp.agents.rollout import rollout
from rlhp.data import Trajectory, TrajectoryRecorder
from rlhp.data.trajectory import successes
from rlhp.envs import GymEnv
from rlhp.errors import ArgumentError, ConfigError
from rlhp.offline import OfflineAlgorithm
from rlhp.rewards import AgentReward

RELABEL_BYTES = 2**28
"""The most float input (observations and next observations) one relabelling pass of a replay buffer builds."""


class PayRollout(BaseCallback):
    """Pays an on-policy agent's rollout its learned reward in one batched pass when the rollout ends, instead of
    a pass per env step (on MinAtar, 25,000 small passes cost a quarter of the agent's own time): the steps got 0
    (plus the library's value bootstrap at a truncation, which stays), the reward is added to the rollout buffer,
    and so is its share of the advantages and returns."""

    def __init__(self, venv: RewardVecEnvWrapper) -> None:
        super().__init__()
        self.venv = venv

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        paid = self.venv.pay_deferred(RELABEL_BYTES)
        buffer.rewards += paid
        # GAE is linear in the rewards, and the values stay: the advantages the library computed grow by the paid
        # rewards' own GAE. So the rollout's bootstrap value is not needed again (SBX's PPO, unlike SB3's, does
        # not hand it to the callback).
        gain, ongoing = np.zeros_like(paid[0]), np.ones_like(paid[0])
        for step in reversed(range(len(paid))):
            gain = paid[step] + buffer.gamma * buffer.gae_lambda * ongoing * gain
            buffer.advantages[step] += gain
            ongoing = 1.0 - buffer.episode_starts[step]  # whether the step before continues into this one
        buffer.returns = buffer.advantages + buffer.values


class AgentTrainer(TrajectorySource, Agent):
    """Trains an SB3 agent on the learned reward and samples trajectories of its policy.

    Args:
        algorithm: builds the SB3 algorithm from ``env`` and ``seed`` (a partial from config).
        env: the environment factory.
        reward: what the agent learns on: the learned reward net, or the env's own (the ceiling).
        seed: seeds the training env, the sampling env and the algorithm.
        rng: random generator for exploration.
        exploration_frac: share of sampled steps that come from the exploration policy.
        switch_prob: per step, the chance that the exploration policy re-chooses its mode.
        random_prob: when it re-chooses, the chance of acting uniformly at random.
        unsupervised_steps: PEBBLE's pre-training: before the first sample, train this many env steps on
            a state-entropy reward (extra steps beside ``total_timesteps``), so the first queries see
            varied behaviour; an off-policy agent's buffer is relabelled at the first reward update.
        entropy_k: the neighbour whose distance is that reward (see
            :class:`~rlhp.agents.exploration.StateEntropyReward`).
        reset_critic: once the pre-training ends and the buffer holds the task's reward, an off-policy agent's
            critic starts again from fresh weights (see :mod:`rlhp.agents.critic_reset`; PEBBLE's and B-Pref's).
        reset_critic_updates: gradient steps on the buffer right after that reset (B-Pref's ``reset_update``).
        max_episode_steps: cut the agent's training and sampled episodes at this many steps (None: the env's
            own limit); evaluation keeps the env's limit. Shorter episodes start more often in the same
            timesteps, and on a fixed horizon only an episode's start shows how long the agent lasts.
        max_episode_steps_until: from this many agent timesteps on, episodes run to the env's own limit
            again (None: never), so the agent also meets what only long episodes reach (a drifting cart).
    """

    def __init__(self, algorithm: Callable[..., BaseAlgorithm], env: GymEnv, reward: AgentReward, seed: int,
                 rng: np.random.Generator, exploration_frac: float = 0.0, switch_prob: float = 0.5,
                 random_prob: float = 0.5, unsupervised_steps: int = 0, entropy_k: int = 5,
                 reset_critic: bool = False, reset_critic_updates: int = 100, max_episode_steps: int | None = None,
                 max_episode_steps_until: int | None = None) -> None:
        if isinstance(algorithm, OfflineAlgorithm):
            raise ConfigError("agent", f"({algorithm.name}) learns offline, from a fixed dataset: run it with "
                              "trajectories=dataset trajectories.path=<dataset>, or pick an online agent")
        if not reward.markovian:
            raise ConfigError("reward_net", f"({type(reward).__name__}) reads each step with its history, so an "
                              "agent acting in the env cannot be paid it step by step: train an offline agent "
                              "(agent=iql or td3bc) on a dataset (trajectories=dataset), or pick a Markovian "
                              "reward_net")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ArgumentError("max_episode_steps", f"must be >= 1 (or null), got {max_episode_steps}")
        if max_episode_steps_until is not None and max_episode_steps is None:
            raise ArgumentError("max_episode_steps_until", "lifts trajectories.max_episode_steps, which is "
                              "not set; set both, or neither")
        horizon = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
        self.env, self.seed, self.short_until = env, seed, max_episode_steps_until
        self.recorder = TrajectoryRecorder(env.n_envs, env.frame_stack)
        self.venv = RewardVecEnvWrapper(env.make(seed, **horizon), reward, self.recorder)
        # The algorithm comes from the agent group; SB3 checks few of its values itself.
        self.algorithm = self._built(algorithm)
        if isinstance(self.algorithm, OffPolicyAlgorithm) and isinstance(self.algorithm.action_noise,
                                                                          GaussianActionNoise):
            self.algorithm.action_noise.bind(self.venv.action_space)
        # SB3's default logger makes an empty /tmp/SB3-<time> folder on every learn() call; rlhp logs itself.
        self.algorithm.set_logger(Logger(folder=None, output_formats=[]))
        # Sampling uses its own envs so that it never cuts the agent's training episodes short.
        self.sample_venv = env.make(seed + 10_000, **horizon)
        self.sample_venv.action_space.seed(seed)
        self.rng = rng
        self.exploration_frac, self.switch_prob, self.random_prob = exploration_frac, switch_prob, random_prob
        if unsupervised_steps < 0:
            raise ArgumentError("unsupervised_steps", f"must be >= 0, got {unsupervised_steps}")
        self.unsupervised_left, self.entropy_k = unsupervised_steps, entropy_k
        self._check_reset_critic(reset_critic, reset_critic_updates)
        self.reset_critic, self.reset_critic_updates = reset_critic, reset_critic_updates
        self._sampled: dict[str, float] = {}
        self._pretraining: list[Trajectory] = []

    def _built(self, algorithm: Callable[..., BaseAlgorithm]) -> BaseAlgorithm:
        """The SB3 algorithm on the training env, its arguments checked first; what SB3 refuses named by the group."""
        env = self.env
        check_domains(algorithm)
        check_buffer_memory(algorithm, self.venv.observation_space, self.venv.action_space, env.n_envs)
        check_rollout_batch(algorithm, env.n_envs)
        try:
            return algorithm(env=self.venv, seed=self.seed)
        except AssertionError as err:  # SB3 asserts the spaces it supports
            raise ConfigError("agent", f"cannot train on env {env.id!r}: {err}. Pick an agent that "
                              f"supports {self.venv.action_space} actions") from None
        except (ValueError, TypeError) as err:  # what SB3 itself refuses, named by the group it came from
            raise ConfigError("agent", f"is refused by {getattr(algorithm, 'func', algorithm).__name__}: {err}") \
                from None

    critic_reset_due = False
    """Whether the critic starts again before the next training (set when the pre-training ends)."""

    def _check_reset_critic(self, reset_critic: bool, updates: int) -> None:
        """Refuse a critic reset that cannot happen: no pre-training to reset after, or no critic to reset."""
        if updates < 0:
            raise ArgumentError("reset_critic_updates", f"must be >= 0, got {updates}")
        if not reset_critic:
            return
        if self.unsupervised_left == 0:
            raise ArgumentError("reset_critic", "resets the critic when the unsupervised pre-training ends, and "
                                "this run has none: set trajectories.unsupervised_steps (e.g. 9000, PEBBLE's), or "
                                "trajectories.reset_critic=false")
        if not can_restart_critic(self.algorithm):
            raise ArgumentError("reset_critic", "resets an off-policy agent's critic (SAC, TD3, DDPG, TQC, "
                                f"CrossQ), and {type(self.algorithm).__name__} has none: set "
                                "trajectories.reset_critic=false")

    @property
    def agent(self) -> AgentTrainer:
        """This source trains its own agent."""
        return self

    @property
    def rollout_steps(self) -> int:
        """Env steps SB3 collects between updates: it only ever trains whole multiples of this."""
        algo = self.algorithm
        if isinstance(algo, OnPolicyAlgorithm):
            return algo.n_steps * algo.n_envs
        freq = algo.train_freq
        return (freq.frequency if freq.unit == TrainFrequencyUnit.STEP else 1) * algo.n_envs

    def train(self, steps: int) -> AgentReport:
        """Relabel the replay buffer (and, after the pre-training, reset the critic), then train the whole rollouts
        that fit in ``steps`` env steps."""
        self._relabel()
        if self.critic_reset_due:
            restart_critic(self.algorithm, self.seed)
            if self.reset_critic_updates:
                self.algorithm.train(gradient_steps=self.reset_critic_updates, batch_size=self.algorithm.batch_size)
            self.critic_reset_due = False
        steps -= steps % self.rollout_steps
        if steps <= 0:
            return AgentReport(0, np.zeros(0))
        if self.short_until is not None and self.algorithm.num_timesteps >= self.short_until:
            self._lift_episode_limit()
        before, finished = self.algorithm.num_timesteps, len(self.recorder.finished)
        # An on-policy agent's learned reward is paid per rollout; the env's own reward costs nothing per step.
        if isinstance(self.algorithm, OnPolicyAlgorithm) and not self.venv.reward.reads_env_reward:
            with self.venv.deferred():
                self.algorithm.learn(steps, reset_num_timesteps=False, progress_bar=False,
                                     callback=PayRollout(self.venv))
        else:
            self.algorithm.learn(steps, reset_num_timesteps=False, progress_bar=False)
        episodes = self.recorder.finished[finished:]
        returns = np.array([t.rews.sum() for t in episodes])
        return AgentReport(self.algorithm.num_timesteps - before, returns, successes(episodes))

    def _lift_episode_limit(self) -> None:
        """From now on, train and sample on episodes of the env's own length (the cut ones in progress end)."""
        self.venv = RewardVecEnvWrapper(self.env.make(self.seed), self.venv.reward, self.recorder)
        self.algorithm.set_env(self.venv)  # SB3 resets it at the next learn(), which drops the cut episodes
        self.sample_venv = self.env.make(self.seed + 10_000)
        self.short_until = None

    def _relabel(self) -> None:
        """Relabel an off-policy agent's whole replay buffer with the current reward model, in batched passes
        of at most :data:`RELABEL_BYTES` of float inputs each (an image buffer is gigabytes), before every
        training phase (stale rewards there are the known failure of naive integrations; so a checkpoint need
        not store them). On-policy agents keep no rewards between updates, and the env's own reward is never
        stale."""
        buffer = self._relabelled_buffer()
        if buffer is None:
            return
        n = buffer.buffer_size if buffer.full else buffer.pos
        per_row = 2 * buffer.n_envs * int(np.prod(buffer.obs_shape)) * 4  # an observation and the next, as floats
        rows = max(1, RELABEL_BYTES // per_row)
        for lo in range(0, n, rows):
            self._relabel_rows(buffer, np.arange(lo, min(n, lo + rows)))

    def _relabel_rows(self, buffer: ReplayBuffer, rows: np.ndarray) -> None:
        """Relabel the buffer's ``rows`` (each a step of every env copy) in one batched pass."""
        obs = buffer.observations[rows[0]:rows[-1] + 1]
        next_obs = (buffer.observations[(rows + 1) % buffer.buffer_size] if buffer.optimize_memory_usage
                    else buffer.next_observations[rows[0]:rows[-1] + 1])
        terminated = (buffer.dones[rows] > 0) & ~(buffer.timeouts[rows] > 0)
        lead = len(rows) * buffer.n_envs
        # SB3 stores actions as (..., action_dim); the reward net takes the env's own action shape.
        acts = buffer.actions[rows].reshape(lead, *self.venv.action_space.shape)
        rews = self.venv.reward.agent_reward(obs.reshape(lead, *buffer.obs_shape), acts,
                                             next_obs.reshape(lead, *buffer.obs_shape), terminated.reshape(lead),
                                             buffer.rewards[rows].reshape(lead), update_stats=False)
        buffer.rewards[rows] = rews.reshape(len(rows), buffer.n_envs)

    def derived_arrays(self) -> list[np.ndarray]:
        """The replay buffer's rewards, relabelled before every training phase (see :meth:`train`)."""
        buffer = self._relabelled_buffer()
        return [] if buffer is None else [buffer.rewards]

    def _relabelled_buffer(self) -> ReplayBuffer | None:
        """The replay buffer whose rewards the reward model recomputes; none for an on-policy agent or
        for the env's own reward."""
        algo = self.algorithm
        if not isinstance(algo, OffPolicyAlgorithm) or self.venv.reward.reads_env_reward:
            return None
        return algo.replay_buffer

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """The agent's stochastic action, as during training."""
        return self.algorithm.predict(obs, deterministic=False)[0]

    def sample(self, steps: int) -> list[Trajectory]:
        """Freshest training episodes first (those left over from the last sample next), topped up by
        rollouts; a share from exploration."""
        unsupervised = self._pretrain_unsupervised()
        explore = int(round(self.exploration_frac * steps))
        wanted = steps - explore
        finished = self.recorder.pop_finished()
        fresh = take(reversed(finished), wanted)
        # The freshest of the rest wait for the next sample (up to one sample's worth): on a fixed
        # horizon every env copy finishes at once, so a round's training yields all or nothing, and
        # topping up by rollouts costs env steps that training on the true reward never takes.
        self.recorder.finished = take(reversed(finished[:len(finished) - len(fresh)]), wanted)[::-1]
        from_training = sum(map(len, fresh))
        if wanted > from_training:
            fresh += rollout(self.sample_venv, self.policy, wanted - from_training, frame_stack=self.env.frame_stack)
        explored: list[Trajectory] = []
        if explore:
            exploring = mixed_policy(self.policy, self.sample_venv.action_space, self.rng, self.random_prob,
                                     self.switch_prob)
            explored = rollout(self.sample_venv, exploring, explore, frame_stack=self.env.frame_stack)
        self._sampled = {"sampled_from_training_steps": from_training,
                         "sampled_rollout_steps": sum(map(len, fresh)) - from_training,
                         "sampled_exploration_steps": sum(map(len, explored)),
                         **({"unsupervised_steps": unsupervised} if unsupervised else {})}
        return fresh + explored

    @property
    def pretraining_steps(self) -> int:
        """Env steps of each env copy's state-entropy pre-training still to run."""
        return self.unsupervised_left // self.venv.num_envs

    def pretraining_episodes(self) -> list[Trajectory]:
        """The episodes the state-entropy pre-training finished, once (the first sample's round takes them)."""
        episodes, self._pretraining = self._pretraining, []
        return episodes

    def _pretrain_unsupervised(self) -> int:
        """Train the agent on the state-entropy reward, once, before its first sample; return the steps."""
        if self.unsupervised_left <= 0:
            return 0
        before, finished = self.algorithm.num_timesteps, len(self.recorder.finished)
        self.venv.intrinsic = StateEntropyReward(self.entropy_k)
        try:
            self.algorithm.learn(self.unsupervised_left, reset_num_timesteps=False, progress_bar=False)
        finally:
            self.venv.intrinsic = None
        self.unsupervised_left = 0
        self._restore_env_rewards()
        self.critic_reset_due = self.reset_critic
        # The same episodes as the sample's, not copies, handed over once (see pretraining_episodes).
        self._pretraining = self.recorder.finished[finished:]
        return self.algorithm.num_timesteps - before

    def _restore_env_rewards(self) -> None:
        """Put the env's own rewards back in the buffer rows the pre-training filled with its intrinsic one, where
        the agent is paid the env's reward (:class:`~rlhp.rewards.EnvReward`): no relabelling ever rewrites those
        rows, as a learned reward's rewrites the whole buffer before each training. (The CLI's ceiling samples
        nothing, so it never pre-trains.)"""
        paid, self.venv.env_rewards_while_intrinsic = self.venv.env_rewards_while_intrinsic, []
        if not isinstance(self.algorithm, OffPolicyAlgorithm) or not self.venv.reward.reads_env_reward or not paid:
            return
        buffer = self.algorithm.replay_buffer
        kept = np.stack(paid)[-buffer.buffer_size:]  # a buffer smaller than the pre-training kept its last rows
        rows = (buffer.pos - len(kept) + np.arange(len(kept))) % buffer.buffer_size
        buffer.rewards[rows] = kept

    def metrics(self) -> dict[str, float]:
        """Steps of the last sample taken from training episodes, from extra rollouts of the policy,
        and from the exploration policy."""
        return dict(self._sampled)

    def held_out(self, steps: int) -> list[Trajectory]:
        """Fresh episodes of the current policy, never trained on."""
        return rollout(self.sample_venv, self.policy, steps, frame_stack=self.env.frame_stack)
