"""Offline RL's parts: the algorithms (rlhp's IQL and TD3+BC in JAX, as the agent group configures them), a
dataset's transitions, and a saved policy read back with NumPy.

The agent that trains them is :class:`rlhp.agents.offline.OfflineAgent`, beside the online one."""

from rlhp.offline.algorithm import OfflineAlgorithm
from rlhp.offline.saved import saved_policy
from rlhp.offline.transitions import Transitions

__all__ = ["OfflineAlgorithm", "Transitions", "saved_policy"]
