"""What an agent is trained on: the interface the learned reward and the env's own reward share."""

from __future__ import annotations

from typing import ClassVar, Protocol

import numpy as np


class AgentReward(Protocol):
    """What an agent is trained on, step by step and when its stored transitions are relabelled."""

    reads_env_reward: ClassVar[bool]
    """Whether the reward is the env's own (then stored rewards are kept, never relabelled)."""
    markovian: ClassVar[bool]
    """Whether a step's reward is a function of that step alone, so an agent can be paid it step by step."""

    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray, update_stats: bool = True) -> np.ndarray:
        """The agent's reward for a batch of transitions, given the env's own rewards for them."""
        ...

    def relabel(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                env_rewards: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """The agent's reward for whole episodes laid end to end, the first of each at a row in ``starts``."""
        ...


class EnvReward:
    """The env's own reward, through the learned reward's interface: the true-reward ceiling."""

    reads_env_reward: ClassVar[bool] = True
    markovian: ClassVar[bool] = True

    def agent_reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                     env_rewards: np.ndarray, update_stats: bool = True) -> np.ndarray:
        """The env's rewards, unchanged."""
        return env_rewards

    def relabel(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
                env_rewards: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """The env's rewards, unchanged."""
        return env_rewards
