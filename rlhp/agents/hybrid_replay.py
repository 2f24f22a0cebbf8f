"""QPA's hybrid experience replay (Hu et al., ICLR 2024): a share of every off-policy batch comes from the newest
transitions, so the critic is most accurate where the current policy goes, which is where the policy-aligned
queries teach the reward."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from rlhp.errors import ArgumentError


class HybridReplayBuffer(ReplayBuffer):
    """SB3's replay buffer whose batches draw ``recent_frac`` of their transitions uniformly from the newest
    ``recent_steps`` and the rest uniformly from the whole buffer (QPA: half, from the last 10 episodes).

    It is SB3's buffer otherwise (relabelled, saved and resumed as it is), for SB3's and SBX's off-policy agents:
    ``agent.replay_buffer_class`` and ``agent.replay_buffer_kwargs``.
    """

    def __init__(self, buffer_size: int, observation_space: spaces.Space, action_space: spaces.Space,
                 device: str = "auto", n_envs: int = 1, optimize_memory_usage: bool = False,
                 handle_timeout_termination: bool = True, recent_frac: float = 0.5,
                 recent_steps: int = 10_000) -> None:
        if not 0.0 <= recent_frac <= 1.0:
            raise ArgumentError("agent.replay_buffer_kwargs.recent_frac", f"must be in [0, 1], got {recent_frac}")
        if recent_steps < n_envs:
            raise ArgumentError("agent.replay_buffer_kwargs.recent_steps",
                                f"must be at least the {n_envs} env copies' one step each, got {recent_steps}")
        super().__init__(buffer_size, observation_space, action_space, device, n_envs, optimize_memory_usage,
                         handle_timeout_termination)
        self.recent_frac, self.recent_steps = recent_frac, recent_steps

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """``batch_size`` transitions: ``recent_frac`` of them from the newest ``recent_steps``, the rest from all."""
        recent = int(batch_size * self.recent_frac)
        stored = self.buffer_size if self.full else self.pos
        # The memory-saving layout has no next observation for the row at ``pos`` yet: neither draw takes it.
        usable = stored - 1 if self.optimize_memory_usage and self.full else stored
        window = max(1, min(self.recent_steps // self.n_envs, usable))
        back = np.concatenate([np.random.randint(0, usable, size=batch_size - recent),
                               np.random.randint(0, window, size=recent)])
        rows = (self.pos - 1 - back) % self.buffer_size  # rows counted back from the newest
        # SB3's hook for a subclass's own choice of rows (its HER buffer overrides sampling the same way).
        return self._get_samples(rows, env=env)
