"""Reward networks: an MLP over (obs, action, next_obs, done), optionally an ensemble of them.

Every net holds ``members`` copies of its MLP as stacked weight tensors, so a whole ensemble
runs in one batched matrix multiply; the basic net is the one-member case.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.preprocessing import get_flattened_obs_dim, preprocess_obs
from torch import nn

from rlhp.data import Trajectory
from rlhp.errors import ArgumentError
from rlhp.preference_model import discount_weights, discounted_returns


class AgentReward(Protocol):
    """What an agent is trained on, step by step and when its stored transitions are relabelled."""

    reads_env_reward: ClassVar[bool]
    """Whether the reward is the env's own (then stored rewards are kept, never relabelled)."""

    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray, update_stats: bool = True) -> np.ndarray:
        """The agent's reward for a batch of transitions, given the env's own rewards for them."""
        ...


class EnvReward:
    """The env's own reward, through the learned reward's interface: the true-reward ceiling."""

    reads_env_reward: ClassVar[bool] = True

    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray, update_stats: bool = True) -> np.ndarray:
        """The env's rewards, unchanged."""
        return env_rewards


class BatchedMLP(nn.Module):
    """``members`` independent MLPs with scalar output, evaluated together."""

    def __init__(self, members: int, in_dim: int, hidden_sizes: list[int]) -> None:
        super().__init__()
        sizes = [in_dim, *hidden_sizes, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1 / math.sqrt(fan_in)  # nn.Linear's default init, per member
            self.weights.append(nn.Parameter(torch.empty(members, fan_in, fan_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(members, 1, fan_out).uniform_(-bound, bound)))
        # The same Parameter objects as plain tuples, read on every call: ParameterList's own indexing and
        # iterator parse a string index per item (8% of training on CartPole-sized batches). Moving the
        # module (``.to``) or loading a state dict changes these tensors in place, so the tuples stay valid.
        self.hidden = tuple(zip(self.weights[:-1], self.biases[:-1]))
        self.output = (self.weights[-1], self.biases[-1])

    @property
    def first_weight(self) -> torch.Tensor:
        """The input layer's weights, (members, in_dim, width)."""
        return self.hidden[0][0] if self.hidden else self.output[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(members or 1, N, in_dim) -> (members, N)."""
        return self.head(self.features(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last hidden layer's activations: (members or 1, N, in_dim) -> (members, N, width)."""
        for i, (w, b) in enumerate(self.hidden):
            x = torch.relu_(torch.baddbmm(b, x.expand(w.shape[0], -1, -1) if i == 0 else x, w))
        return x

    def head(self, h: torch.Tensor, bias_scale: float = 1.0) -> torch.Tensor:
        """The linear output layer, (members, N, width) -> (members, N), with its bias times
        ``bias_scale``: a weighted sum of rows' features then scores as the same sum of their outputs."""
        w_out, b_out = self.output
        if bias_scale != 1.0:
            b_out = b_out * bias_scale
        if w_out.shape[0] == 1:
            return torch.baddbmm(b_out, h, w_out).squeeze(-1)
        # Several members: CPU bmm is slow at batched matrix-vector products (the output layer's
        # backward took 40% longer than as dot products), so they are dot products here.
        return torch.linalg.vecdot(h, w_out.transpose(1, 2)) + b_out.squeeze(-1)


class RunningNorm(nn.Module):
    """Running mean/variance over the leading axes (Chan et al. parallel update)."""

    def __init__(self, shape: tuple[int, ...] = (), eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def forward(self, x: torch.Tensor, update: bool = False) -> torch.Tensor:
        """Normalise ``x``, first folding it into the statistics when ``update``."""
        if update and x.numel():
            flat = x.reshape(-1, *self.mean.shape)
            n, mean, var = len(flat), flat.mean(0), flat.var(0, unbiased=False)
            total = self.count + n
            delta = mean - self.mean
            # In place, so the buffers stay ordinary tensors even when updated under inference mode.
            self.var.copy_((self.var * self.count + var * n + delta**2 * self.count * n / total) / total)
            self.mean += delta * n / total
            self.count.copy_(total)
        return (x - self.mean) / torch.sqrt(self.var + self.eps)

    def reset(self) -> None:
        """Forget the statistics."""
        self.mean.zero_(), self.var.fill_(1), self.count.zero_()


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
        std_coef: the agent's reward is mean + std_coef * std over members (exploration bonus).
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
    ) -> None:
        super().__init__()
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
        self.mlp = BatchedMLP(members, in_dim, list(hidden_sizes))
        self.input_norm = RunningNorm((in_dim,)) if normalize_input else None
        self.input_clip = input_clip
        self.shaping_gamma = shaping_gamma
        self.potential = BatchedMLP(members, obs_dim, list(hidden_sizes)) if shaping_gamma is not None else None
        self.state_norm = RunningNorm((obs_dim,)) if normalize_input and self.potential is not None else None
        self.norm = RunningNorm() if normalize_output else None
        self.std_coef = std_coef

    @property
    def input_dim(self) -> int:
        """Width of the reward MLP's input (of :meth:`encode`'s ``x``)."""
        return self.mlp.first_weight.shape[1]

    @property
    def device(self) -> torch.device:
        """Where the net's weights are (its inputs must be there too)."""
        return self.mlp.first_weight.device

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
        parts = [state if use_state else None, self._flat(acts, self.action_space, lead) if use_action else None,
                 next_state if use_next_state else None, done if use_done else None]
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
        rew = self.mlp(inputs.x.reshape(groups, -1, inputs.x.shape[-1]))
        if inputs.states is not None:
            phi = self.potential(inputs.states.reshape(groups, -1, inputs.states.shape[-1]))
            phi, next_phi = phi.reshape(self.members, -1, 2).unbind(-1)
            rew = rew + self.shaping_gamma * next_phi * (1 - inputs.done.reshape(groups, -1)) - phi
        return rew.reshape(self.members, *(lead[1:] if per_member else lead))

    def returns(self, inputs: RewardInputs, discount_factor: float = 1.0, per_member: bool = False) -> torch.Tensor:
        """Discounted sums over the last leading axis (time) of :meth:`score`'s rewards: shape
        (members, *lead[:-1]), or (members, *lead[1:-1]) with ``per_member``.

        Without shaping the output layer is linear, so it scores each fragment's discounted sum of
        features once instead of every step: the same returns, and a backward pass with no per-step
        output to differentiate (15% less reward-training time in the CartPole loop).
        """
        if inputs.states is not None:
            return discounted_returns(self.score(inputs, per_member), discount_factor)
        lead = tuple(inputs.x.shape[:-1])
        groups = lead[0] if per_member else 1
        features = self.mlp.features(inputs.x.reshape(groups, -1, inputs.x.shape[-1]))
        steps = lead[-1]
        features = features.reshape(self.members, -1, steps, features.shape[-1])
        if discount_factor == 1.0:
            summed, weight = features.sum(2), float(steps)
        else:
            weights = discount_weights(steps, discount_factor, features)
            summed, weight = (features * weights[:, None]).sum(2), float(weights.sum())
        return self.mlp.head(summed, bias_scale=weight).reshape(self.members, *lead[1 if per_member else 0:-1])

    def forward(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor,
                per_member: bool = False) -> torch.Tensor:
        """Rewards of shape (members, *lead) for inputs with leading shape ``lead`` (see :meth:`score`)."""
        return self.score(self.encode(obs, acts, next_obs, dones), per_member)

    reads_env_reward: ClassVar[bool] = False

    @torch.inference_mode()
    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray | None = None, update_stats: bool = True) -> np.ndarray:
        """The reward handed to the RL agent for a batch of transitions (numpy in, numpy out); the env's
        rewards are not read (see :class:`AgentReward`)."""
        device = self.device  # once: it runs on every env step of the agent
        # forward, not __call__: there are no hooks to run, and this runs on every env step.
        rew = self.forward(*(torch.as_tensor(a, device=device) for a in (obs, acts, next_obs, dones)))
        out = rew.mean(0)
        if self.members > 1 and self.std_coef:
            out = out + self.std_coef * rew.std(0)
        if self.norm is not None:
            out = self.norm(out, update=update_stats)
        return out.cpu().numpy()


@torch.no_grad()
def reward_correlation(reward_net: RewardNet, trajectories: list[Trajectory]) -> float | None:
    """Pearson correlation of the (member-mean) learned reward with the true reward per transition."""
    obs = np.concatenate([t.obs[:-1] for t in trajectories])
    next_obs = np.concatenate([t.obs[1:] for t in trajectories])
    acts = np.concatenate([t.acts for t in trajectories])
    dones = np.concatenate([np.arange(len(t)) == len(t) - 1 if t.terminal else np.zeros(len(t), bool)
                            for t in trajectories])
    true = np.concatenate([t.rews for t in trajectories])
    inputs = (torch.as_tensor(a, device=reward_net.device) for a in (obs, acts, next_obs, dones))
    learned = reward_net(*inputs).mean(0).cpu().numpy()
    if true.std() == 0 or learned.std() == 0:
        return None
    return float(np.corrcoef(learned, true)[0, 1])
