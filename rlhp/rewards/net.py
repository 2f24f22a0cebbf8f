"""Reward networks: an MLP over (obs, action, next_obs, done), optionally an ensemble of them.

Every net holds ``members`` copies of its body (:mod:`rlhp.rewards.bodies`) as stacked weights, so a whole
ensemble runs in one batched pass; the basic net is the one-member case.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.preprocessing import get_flattened_obs_dim, preprocess_obs
from torch import nn

from rlhp.data import Trajectory
from rlhp.data.frames import as_tensor
from rlhp.errors import ArgumentError
from rlhp.preference_model import discount_weights, discounted_returns
from rlhp.rewards.bodies import BatchedCNN, BatchedMLP
from rlhp.rewards.norm import RunningNorm

SCORE_CHUNK_BYTES = 2**28
"""The most float input one scoring pass outside training builds: image observations are large."""

OUTPUTS = ("linear", "tanh")
"""What a member's step reward passes through last: nothing, or tanh."""


class RewardInputs(NamedTuple):
    """Transitions encoded for the reward MLPs; every field has the same leading shape."""

    x: torch.Tensor
    """(*lead, in_dim): the reward MLP's input."""
    states: torch.Tensor | None
    """(*lead, 2, obs_dim): s and s' for the shaping potential, or None without shaping."""
    done: torch.Tensor | None
    """(*lead): 1.0 where the episode ended (for the potential), or None without shaping."""

    def select(self, idx: torch.Tensor) -> RewardInputs:
        """The rows at the integer index tensor ``idx`` (any shape) along the first axis, so the
        result's leading shape is ``idx.shape``."""
        # index_select copies whole rows: twice as fast as advanced indexing for an ensemble's batch.
        flat = idx.reshape(-1)
        return RewardInputs(*(None if t is None else t.index_select(0, flat).view(*idx.shape, *t.shape[1:])
                              for t in self))

    def columns(self, keep: torch.Tensor) -> RewardInputs:
        """The pairs of an ensemble's batch (members, pairs, ...) where the boolean ``keep`` (pairs) holds."""
        return RewardInputs(*(None if t is None else t[:, keep] for t in self))

    def window(self, starts: torch.Tensor, length: int) -> RewardInputs:
        """``length`` steps of the last leading axis (time) from each row's start; ``starts`` has the leading
        shape without that axis, and each start leaves room for the window."""
        axis = starts.dim()
        steps = starts[..., None] + torch.arange(length, device=starts.device)

        def take(t: torch.Tensor) -> torch.Tensor:
            return t.take_along_dim(steps.view(*steps.shape, *(1,) * (t.dim() - axis - 1)), dim=axis)
        return RewardInputs(*(None if t is None else take(t) for t in self))


class RewardNet(nn.Module):
    """Learned reward r(s, a, s', done), one scalar per member per transition.

    Args:
        observation_space, action_space: the env's spaces; inputs are preprocessed as SB3
            does (one-hot for discrete spaces, flattened boxes, images scaled to [0, 1]).
        hidden_sizes: widths of the hidden layers.
        members: number of independently initialised MLPs (1: basic net; more: ensemble).
        use_state, use_action, use_next_state, use_done: which inputs the MLP sees.
        shaping_gamma: when set, adds a learned potential: gamma * phi(s') * (1 - done) - phi(s).
        normalize_input: standardise the MLP's inputs with statistics of the preference data
            (refitted each round by the trainer); without it, large raw observations such as
            a fallen CartPole's spinning angle saturate the net.
        input_clip: clip standardised inputs to +-this, so the net cannot extrapolate to
            extreme rewards in states far outside the preference data (the agent finds them).
        normalize_output: scale the reward given to the agent by running statistics.
        std_coef: the agent's reward is mean + beta * std over members, with beta = std_coef at first. Positive,
            an exploration bonus where the members disagree (RUNE, Liang et al. 2022); negative, a penalty
            there, so the agent keeps off what the labels leave in doubt, such as where a teacher's wrong labels
            pull the members apart (as Coste et al. 2024's uncertainty-weighted objective does with the variance).
        std_decay: beta = std_coef * (1 - std_decay) ** t after the agent's t env steps (RUNE's decay), so the
            bonus fades as the reward is learned; steps are counted as the agent takes them, and relabelled
            transitions get the current beta.
        output: ``linear`` (a step's reward unbounded) or ``tanh`` (each member's step reward in (-1, 1), as the
            PEBBLE line of work's nets end: a fit that sharpens its preferences cannot scale the agent's reward
            up with them).
    """

    MAX_MEMBERS = 256
    MAX_WIDTH = 65_536

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: list[int] = (32, 32),
        members: int = 1,
        use_state: bool = True,
        use_action: bool = True,
        use_next_state: bool = False,
        use_done: bool = False,
        shaping_gamma: float | None = None,
        normalize_input: bool = True,
        input_clip: float | None = 5.0,
        normalize_output: bool = True,
        std_coef: float = 0.0,
        std_decay: float = 0.0,
        output: str = "linear",
    ) -> None:
        super().__init__()
        if output not in OUTPUTS:
            raise ArgumentError("output", f"must be one of {', '.join(OUTPUTS)}, got {output!r}")
        self.output = output
        if not (use_state or use_action or use_next_state or use_done):
            raise ArgumentError("use_state", "and use_action, use_next_state, use_done are all false: the net sees "
                                "nothing")
        # The caps are far beyond any useful size; above them torch fails deep inside an allocation.
        if not 1 <= members <= self.MAX_MEMBERS:
            raise ArgumentError("members", f"must lie in [1, {self.MAX_MEMBERS}], got {members}")
        if not all(1 <= width <= self.MAX_WIDTH for width in hidden_sizes):
            raise ArgumentError("hidden_sizes", f"must be widths in [1, {self.MAX_WIDTH}], got {list(hidden_sizes)}")
        self.observation_space, self.action_space = observation_space, action_space
        self.members = members
        self.use = (use_state, use_action, use_next_state, use_done)
        obs_dim = get_flattened_obs_dim(observation_space)
        act_dim = get_flattened_obs_dim(action_space)
        in_dim = obs_dim * (use_state + use_next_state) + act_dim * use_action + use_done
        self.hidden_sizes = list(hidden_sizes)
        self.body = self.make_body(in_dim, use_state + use_next_state)
        self.input_norm = RunningNorm((in_dim,)) if normalize_input else None
        self.input_clip = input_clip
        self.shaping_gamma = shaping_gamma
        self.potential = self.make_body(obs_dim, 1) if shaping_gamma is not None else None
        self.state_norm = RunningNorm((obs_dim,)) if normalize_input and self.potential is not None else None
        self.norm = RunningNorm() if normalize_output else None
        if not 0 <= std_decay < 1:
            raise ArgumentError("std_decay", f"must lie in [0, 1), got {std_decay}")
        self.std_coef, self.std_decay = std_coef, std_decay
        self.bonus_steps = 0
        self.train(False)  # dropout and batch norm, where a body has them, train only inside the reward trainer

    def make_body(self, in_dim: int, states: int) -> BatchedMLP | BatchedCNN:
        """The members' networks on flat inputs of ``in_dim``, of which the first are ``states`` observations."""
        return BatchedMLP(self.members, in_dim, self.hidden_sizes)

    @property
    def input_dim(self) -> int:
        """Width of the body's input (of :meth:`encode`'s ``x``)."""
        return self.body.in_dim

    @property
    def device(self) -> torch.device:
        """Where the net's weights are (its inputs must be there too)."""
        return self.body.first_weight.device

    def _flat(self, x: torch.Tensor, space: gym.Space, lead: tuple[int, ...]) -> torch.Tensor:
        x = x.reshape(math.prod(lead), *space.shape)
        return preprocess_obs(x, space, normalize_images=True).reshape(len(x), -1).float()

    def _inputs(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Flat (N, F) features for the reward MLP, and flat states, next states and dones."""
        lead = tuple(dones.shape)
        use_state, use_action, use_next_state, use_done = self.use
        shaping = self.potential is not None
        # Only what is used is preprocessed: this runs on every env step of the agent.
        state = self._flat(obs, self.observation_space, lead) if use_state or shaping else None
        next_state = self._flat(next_obs, self.observation_space, lead) if use_next_state or shaping else None
        done = dones.reshape(-1, 1).float()
        # Observations first, so an image body finds its images side by side at the start of a row.
        parts = [state if use_state else None, next_state if use_next_state else None,
                 self._flat(acts, self.action_space, lead) if use_action else None, done if use_done else None]
        used = [p for p in parts if p is not None]
        x = used[0] if len(used) == 1 else torch.cat(used, dim=-1)
        return x, state, next_state, done

    @torch.no_grad()
    def fit_input_norm(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor,
                       dones: torch.Tensor) -> None:
        """Set the input statistics to those of these transitions (no-op without normalize_input)."""
        if self.input_norm is None:
            return
        x, state, next_state, _ = self._inputs(obs, acts, next_obs, dones)
        self.input_norm.reset()
        self.input_norm(x, update=True)
        if self.state_norm is not None:
            self.state_norm.reset()
            self.state_norm(torch.cat([state, next_state]), update=True)

    def encode(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor
               ) -> RewardInputs:
        """Transitions with leading shape ``lead`` as the MLPs see them (standardised and clipped)."""
        lead = tuple(dones.shape)
        x, state, next_state, done = self._inputs(obs, acts, next_obs, dones)
        x = self._standardise(x, self.input_norm).reshape(*lead, x.shape[-1])
        if self.potential is None:
            return RewardInputs(x, None, None)
        states = torch.stack([state, next_state], dim=1).reshape(*lead, 2, state.shape[-1])
        if self.state_norm is not None:
            states = self._standardise(states, self.state_norm)
        return RewardInputs(x, states, done.reshape(lead))

    def _standardise(self, x: torch.Tensor, norm: RunningNorm | None) -> torch.Tensor:
        if norm is not None:
            x = norm(x)
        return x if self.input_clip is None else x.clamp(-self.input_clip, self.input_clip)

    def score(self, inputs: RewardInputs, per_member: bool = False) -> torch.Tensor:
        """Rewards of shape (members, *lead) for :meth:`encode`'s output with leading shape ``lead``.

        With ``per_member`` the inputs' first axis is the member axis (each member scores its
        own transitions, as in bootstrapped training) and the output keeps that shape.
        """
        lead = tuple(inputs.x.shape[:-1])
        groups = lead[0] if per_member else 1
        rew = self.body(inputs.x.reshape(groups, -1, inputs.x.shape[-1]))
        if self.output == "tanh":
            rew = torch.tanh(rew)
        if inputs.states is not None:
            phi = self.potential(inputs.states.reshape(groups, -1, inputs.states.shape[-1]))
            phi, next_phi = phi.reshape(self.members, -1, 2).unbind(-1)
            rew = rew + self.shaping_gamma * next_phi * (1 - inputs.done.reshape(groups, -1)) - phi
        return rew.reshape(self.members, *(lead[1:] if per_member else lead))

    def returns(self, inputs: RewardInputs, discount_factor: float, per_member: bool = False) -> torch.Tensor:
        """Discounted sums over the last leading axis (time) of :meth:`score`'s rewards: shape
        (members, *lead[:-1]), or (members, *lead[1:-1]) with ``per_member``.

        Without shaping a linear output layer scores each fragment's discounted sum of features once
        instead of every step: the same returns, and a backward pass with no per-step output to
        differentiate (15% less reward-training time in the CartPole loop).
        """
        if inputs.states is not None or self.output != "linear":
            return discounted_returns(self.score(inputs, per_member), discount_factor)
        lead = tuple(inputs.x.shape[:-1])
        groups = lead[0] if per_member else 1
        features = self.body.features(inputs.x.reshape(groups, -1, inputs.x.shape[-1]))
        steps = lead[-1]
        features = features.reshape(self.members, -1, steps, features.shape[-1])
        if discount_factor == 1.0:
            summed, weight = features.sum(2), float(steps)
        else:
            weights = discount_weights(steps, discount_factor, features)
            summed, weight = (features * weights[:, None]).sum(2), float(weights.sum())
        return self.body.head(summed, bias_scale=weight).reshape(self.members, *lead[1 if per_member else 0:-1])

    def forward(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor,
                per_member: bool = False) -> torch.Tensor:
        """Rewards of shape (members, *lead) for inputs with leading shape ``lead`` (see :meth:`score`)."""
        return self.score(self.encode(obs, acts, next_obs, dones), per_member)

    @torch.no_grad()
    def score_in_chunks(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor,
                        dones: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` in passes over the first axis of at most :data:`SCORE_CHUNK_BYTES` of float input
        each (an observation and the next per step); the same rewards, (members, *lead)."""
        rows = max(1, SCORE_CHUNK_BYTES // (2 * 4 * self.input_dim * max(1, math.prod(dones.shape[1:]))))
        return torch.cat([self.forward(*(x[lo:lo + rows] for x in (obs, acts, next_obs, dones)))
                          for lo in range(0, len(dones), rows)], dim=1)

    reads_env_reward: ClassVar[bool] = False
    markovian: ClassVar[bool] = True
    """Whether a step's reward is a function of that step alone (so an agent can be paid it step by step)."""

    def check_fragment_length(self, length: int) -> None:
        """Raise :class:`ArgumentError` when the net cannot score fragments of ``length`` steps (a Markovian
        net scores any length)."""

    @torch.no_grad()
    def episode_scores(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor,
                       starts: torch.Tensor) -> torch.Tensor:
        """Rewards (members, N) of N transitions of whole episodes laid end to end, the first of each at a row
        in ``starts`` (a Markovian net scores each transition alone, wherever its episode starts)."""
        return self.score_in_chunks(obs, acts, next_obs, dones)

    @property
    def std_beta(self) -> float:
        """The exploration bonus's coefficient now: ``std_coef`` decayed over the agent's steps so far."""
        return self.std_coef * (1 - self.std_decay) ** self.bonus_steps

    @torch.inference_mode()
    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray | None = None, update_stats: bool = True) -> np.ndarray:
        """The reward handed to the RL agent for a batch of transitions (numpy in, numpy out); the env's
        rewards are not read (see :class:`AgentReward`)."""
        device = self.device  # once: it runs on every env step of the agent
        # forward, not __call__: there are no hooks to run, and this runs on every env step.
        rew = self.forward(*(torch.as_tensor(a, device=device) for a in (obs, acts, next_obs, dones)))
        return self._paid(rew, update_stats)

    @torch.inference_mode()
    def relabel(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                env_rewards: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """The agent's reward for whole episodes laid end to end (see :meth:`episode_scores`), as
        :meth:`agent_reward` pays it but leaving its statistics alone; the env's rewards are not read."""
        device = self.device
        rew = self.episode_scores(*(torch.as_tensor(a, device=device) for a in (obs, acts, next_obs, dones, starts)))
        return self._paid(rew, update_stats=False)

    @torch.no_grad()
    def publish_to(self, agent_copy: RewardNet) -> None:
        """Make ``agent_copy`` (the copy an agent reads while this net trains beside it) this net again. The
        agent's steps moved the copy's output statistics and bonus clock, and training never touches them, so this
        net takes those from the copy first: afterwards the two are one state."""
        if self.norm is not None:
            self.norm.load_state_dict(agent_copy.norm.state_dict())
        self.bonus_steps = agent_copy.bonus_steps
        agent_copy.load_state_dict(self.state_dict())

    def _paid(self, rew: torch.Tensor, update_stats: bool) -> np.ndarray:
        """The members' rewards (members, N) as the agent is paid them: their mean, the exploration bonus, the
        output normalisation."""
        out = rew.mean(0)
        if self.members > 1 and self.std_coef:
            out = out + self.std_beta * rew.std(0)
            self.bonus_steps += len(out) if update_stats else 0
        if self.norm is not None:
            out = self.norm(out, update=update_stats)
        return out.cpu().numpy()


@torch.no_grad()
def reward_correlation(reward_net: RewardNet, trajectories: list[Trajectory]) -> float | None:
    """Pearson correlation of the (member-mean) learned reward with the true reward per transition."""
    def learned_rewards(t: Trajectory) -> torch.Tensor:
        dones = np.arange(len(t)) == len(t) - 1 if t.terminal else np.zeros(len(t), bool)
        # The trajectory's observations as views: stacked frames are never copied whole.
        inputs = (as_tensor(a, reward_net.device) for a in (t.obs[:-1], t.acts, t.obs[1:], dones))
        return reward_net.episode_scores(*inputs, starts=torch.zeros(1, dtype=torch.long,
                                                                     device=reward_net.device)).mean(0)

    true = np.concatenate([t.rews for t in trajectories])
    learned = torch.cat([learned_rewards(t) for t in trajectories]).cpu().numpy()
    if true.std() == 0 or learned.std() == 0:
        return None
    return float(np.corrcoef(learned, true)[0, 1])
