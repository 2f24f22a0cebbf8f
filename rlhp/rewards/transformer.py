"""Preference Transformer (Kim et al., ICLR 2023): a reward model that reads a whole segment.

A causal transformer over the segment's state and action tokens gives each step a reward from the history before
it; a preference-attention layer then weighs the steps, so a segment's score is a weighted sum in which the
moments that decide a preference count most. The segment score enters the same Bradley-Terry loss as the
Markovian net's return. A step's reward depends on its history, so it is read with that history: an offline
agent's dataset is relabelled one window of ``context`` steps at a time (the paper's ``seq_len``), and no online
agent can be paid it step by step.
"""

from __future__ import annotations

import math
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from torch import nn

from rlhp.errors import ArgumentError
from rlhp.preference_model import discounted_returns
from rlhp.rewards.net import RewardInputs, RewardNet

RELABEL_WINDOWS = 4096
"""Windows a relabelling pass scores at once (each ``context`` steps of two tokens)."""


class SegmentTransformer(nn.Module):
    """GPT-style blocks over interleaved state and action tokens, then the preference attention.

    Args:
        obs_dim, act_dim: widths of a step's flat state and action (the input's columns, in that order).
        embed_dim, layers, heads, attention_dim, dropout, max_length: see :class:`PreferenceTransformer`.
    """

    def __init__(self, obs_dim: int, act_dim: int, embed_dim: int, layers: int, heads: int, attention_dim: int,
                 dropout: float, max_length: int) -> None:
        super().__init__()
        self.obs_dim, self.in_dim, self.attention_dim = obs_dim, obs_dim + act_dim, attention_dim
        self.embed_state = nn.Linear(obs_dim, embed_dim)
        self.embed_action = nn.Linear(act_dim, embed_dim)
        self.position = nn.Embedding(max_length, embed_dim)
        self.embed_norm = nn.LayerNorm(embed_dim)
        # Pre-norm blocks with GELU and a final norm, as GPT-2 (the paper's backbone).
        block = nn.TransformerEncoderLayer(embed_dim, heads, 4 * embed_dim, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.final_norm = nn.LayerNorm(embed_dim)
        self.preference = nn.Linear(embed_dim, 2 * attention_dim + 1)

    @property
    def first_weight(self) -> torch.Tensor:
        """The state embedding's weights (where the net's device is read)."""
        return self.embed_state.weight

    def step_outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(N, T, in_dim) -> each step's reward from its history (N, T), and the preference attention's
        queries and keys (N, T, attention_dim)."""
        n, steps, _ = x.shape
        where = self.position(torch.arange(steps, device=x.device))
        states = self.embed_state(x[..., :self.obs_dim]) + where
        actions = self.embed_action(x[..., self.obs_dim:]) + where
        tokens = self.embed_norm(torch.stack([states, actions], dim=2).reshape(n, 2 * steps, -1))
        causal = nn.Transformer.generate_square_subsequent_mask(2 * steps, device=x.device, dtype=tokens.dtype)
        hidden = self.final_norm(self.blocks(tokens, mask=causal, is_causal=True))
        # Each step is read at its action's token: the first that has seen both the state and the action.
        query, key, reward = self.preference(hidden[:, 1::2]).split([self.attention_dim, self.attention_dim, 1], -1)
        return reward.squeeze(-1), query, key

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, T, in_dim) -> each step's reward (N, T) and its preference-weighted reward (N, T), whose sum
        over a segment is the segment's score."""
        reward, query, key = self.step_outputs(x)
        # Bidirectional over the segment: how much each step decides the preference is judged from all of it.
        weights = torch.softmax(query @ key.transpose(1, 2) / math.sqrt(self.attention_dim), dim=-1)
        return reward, (weights @ reward[..., None]).squeeze(-1)


class PreferenceTransformer(RewardNet):
    """Preference Transformer as a reward net: a segment's score is its preference-weighted sum of rewards.

    Args:
        observation_space, action_space: the env's spaces (states and actions are flattened, discrete ones
            one-hot, as :class:`RewardNet` does).
        embed_dim: width of the tokens (the paper: 256; narrower trains in minutes on a CPU).
        layers: transformer blocks (the paper on MuJoCo: 1).
        heads: attention heads per block (the paper: 4).
        attention_dim: width of the preference attention's queries and keys (the paper: 256).
        dropout: in the blocks, while the reward trains (the paper: 0.1).
        max_length: the longest segment it scores (learned positions up to it).
        context: steps of history each step is read with when a dataset is relabelled, itself included
            (the paper's ``seq_len``, 25); at most ``max_length``.
        normalize_input, input_clip, normalize_output: as :class:`RewardNet`.
    """

    markovian: ClassVar[bool] = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, embed_dim: int = 64, layers: int = 1,
                 heads: int = 4, attention_dim: int = 64, dropout: float = 0.1, max_length: int = 1000,
                 context: int = 25, normalize_input: bool = True, input_clip: float | None = 5.0,
                 normalize_output: bool = False) -> None:
        for name, value in (("embed_dim", embed_dim), ("layers", layers), ("heads", heads),
                            ("attention_dim", attention_dim), ("max_length", max_length), ("context", context)):
            if not 1 <= value <= self.MAX_WIDTH:
                raise ArgumentError(name, f"must lie in [1, {self.MAX_WIDTH}], got {value}")
        if embed_dim % heads:
            raise ArgumentError("heads", f"({heads}) must divide embed_dim ({embed_dim})")
        if not 0 <= dropout < 1:
            raise ArgumentError("dropout", f"must lie in [0, 1), got {dropout}")
        if context > max_length:
            raise ArgumentError("context", f"({context}) must not exceed max_length ({max_length})")
        self.shape = dict(embed_dim=embed_dim, layers=layers, heads=heads, attention_dim=attention_dim,
                          dropout=dropout, max_length=max_length)
        self.max_length, self.context = max_length, context
        super().__init__(observation_space, action_space, [embed_dim], members=1, use_state=True, use_action=True,
                         normalize_input=normalize_input, input_clip=input_clip, normalize_output=normalize_output)

    def make_body(self, in_dim: int, states: int) -> SegmentTransformer:
        """The transformer over (state, action) steps."""
        obs_dim = get_flattened_obs_dim(self.observation_space)
        return SegmentTransformer(obs_dim, in_dim - obs_dim, **self.shape)

    def check_fragment_length(self, length: int) -> None:
        """Raise :class:`ArgumentError` when fragments of ``length`` steps are longer than it scores."""
        if length > self.max_length:
            raise ArgumentError("max_length", f"({self.max_length}) is shorter than the fragments ({length} "
                                "steps); raise it")

    def score(self, inputs: RewardInputs, per_member: bool = False) -> torch.Tensor:
        """Each step's reward from the steps before it along the last leading axis (time): (1, *lead)."""
        lead = tuple(inputs.x.shape[:-1])
        reward, _ = self.body(inputs.x.reshape(-1, lead[-1], inputs.x.shape[-1]))
        return reward.reshape(1, *(lead[1:] if per_member else lead))

    def returns(self, inputs: RewardInputs, discount_factor: float, per_member: bool = False) -> torch.Tensor:
        """Each segment's score (the last leading axis is time): (1, *lead[:-1]), or (1, *lead[1:-1])
        with ``per_member``."""
        lead = tuple(inputs.x.shape[:-1])
        _, weighted = self.body(inputs.x.reshape(-1, lead[-1], inputs.x.shape[-1]))
        return discounted_returns(weighted, discount_factor).reshape(1, *lead[1 if per_member else 0:-1])

    @torch.no_grad()
    def episode_scores(self, obs: torch.Tensor, acts: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor,
                       starts: torch.Tensor) -> torch.Tensor:
        """Each step's reward read with up to ``context - 1`` steps of its own episode before it: (1, N).

        A step's window starts ``context - 1`` steps back, or at its episode's start; near the end of the data a
        window runs past it, onto rows a causal model never lets the step see.
        """
        inputs = self.encode(obs, acts, next_obs, dones)
        n = len(dones)
        rows = torch.arange(n, device=dones.device)
        episode_start = starts[torch.searchsorted(starts, rows, right=True) - 1]
        first = torch.maximum(episode_start, rows - (self.context - 1))
        out = torch.empty(n, device=dones.device)
        for lo in range(0, n, RELABEL_WINDOWS):
            part = slice(lo, lo + RELABEL_WINDOWS)
            steps = (first[part, None] + torch.arange(self.context, device=dones.device)).clamp(max=n - 1)
            reward, _, _ = self.body.step_outputs(inputs.x[steps])
            out[part] = reward.gather(1, (rows[part] - first[part])[:, None]).squeeze(1)
        return out[None]

    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray | None = None, update_stats: bool = True) -> np.ndarray:
        """Refused: a step's reward needs its history, which a batch of single transitions lacks."""
        raise ArgumentError("context", "Preference Transformer reads each step with its history; it pays an "
                            "offline agent on a relabelled dataset, not an agent step by step")
