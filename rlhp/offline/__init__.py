"""Offline RL's parts: the algorithms (d3rlpy's, as the agent group configures them) and a dataset's transitions.

The agent that trains them is :class:`rlhp.sources.offline.OfflineAgent`, beside the online one."""

from rlhp.offline.algorithm import OfflineAlgorithm
from rlhp.offline.transitions import Transitions

__all__ = ["OfflineAlgorithm", "Transitions"]
