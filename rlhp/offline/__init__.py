"""Offline agents: trained on a fixed dataset's transitions, relabelled by the learned reward, through d3rlpy.

The agent itself is :class:`rlhp.offline.agent.OfflineAgent` (imported from there: it builds on
:mod:`rlhp.sources.base`, which imports this package's config)."""

from rlhp.offline.algorithm import OfflineAlgorithm
from rlhp.offline.transitions import Transitions

__all__ = ["OfflineAlgorithm", "Transitions", ""]
